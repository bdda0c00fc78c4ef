"""The bucketed ROC AUC: equal to the exact AUC up to ties within a bucket, additive over batches."""

import jax
import numpy as np
import pytest
from sklearn import metrics as sklearn_metrics

from bert_jax.tasks import score_histograms


def _auc(logits, labels, weights=None):
  weights = np.ones_like(labels) if weights is None else weights
  histograms = jax.device_get(score_histograms.probability_histograms(logits, labels, weights))
  return score_histograms.auc_from_histograms(*histograms), histograms


def test_matches_the_exact_auc_and_ignores_zero_weights():
  rng = np.random.default_rng(0)
  labels = (rng.random(4000) < 0.15).astype(np.int32)
  logits = (rng.normal(size=4000) + 1.2 * labels - 2.0).astype(np.float32)
  weights = (rng.random(4000) < 0.8).astype(np.float32)
  auc, _ = _auc(logits, labels, weights)
  kept = weights > 0
  assert auc == pytest.approx(sklearn_metrics.roc_auc_score(labels[kept], logits[kept]), abs=1e-3)
  assert auc != pytest.approx(sklearn_metrics.roc_auc_score(labels, logits), abs=1e-4)


def test_separated_reversed_and_constant_scores():
  labels = np.array([0, 0, 1, 1], np.int32)
  assert _auc(np.array([-3.0, -2.0, 2.0, 3.0]), labels)[0] == 1.0
  assert _auc(np.array([3.0, 2.0, -2.0, -3.0]), labels)[0] == 0.0
  assert _auc(np.zeros(4), labels)[0] == 0.5
  assert _auc(np.zeros(4), np.zeros(4, np.int32))[0] == 0.5  # One class only: undefined.


def test_histograms_of_two_batches_add_up_to_the_whole():
  rng = np.random.default_rng(1)
  labels = (rng.random(600) < 0.3).astype(np.int32)
  logits = rng.normal(size=600).astype(np.float32) + labels
  _, whole = _auc(logits, labels)
  _, first = _auc(logits[:250], labels[:250])
  _, second = _auc(logits[250:], labels[250:])
  for total, part_a, part_b in zip(whole, first, second):
    np.testing.assert_array_equal(total, part_a + part_b)
  assert whole[0].sum() == labels.sum() and whole[1].sum() == 600 - labels.sum()
