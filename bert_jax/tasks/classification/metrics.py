"""Classification and regression metrics (GLUE's): wrappers over scikit-learn and scipy.

Scores that are undefined on degenerate inputs (a correlation when the predictions or labels
are constant) are reported as 0.0, the score of an uninformative predictor, so every metric
stays a finite number in metrics.jsonl; F1 with no positive prediction is 0.0 likewise.
"""

import numpy as np

# scikit-learn and scipy.stats are imported where a score is computed, not with this module:
# every command imports the task registry, and the two take about 1.5 s to import, which a
# pretraining run (and each of its processes on a pod) would otherwise wait for.
# pylint: disable=g-import-not-at-top


def _sklearn_score(name, **options):
  """The scikit-learn metric ``name`` as a float-valued (labels, predictions) function."""

  def score(labels, predictions):
    from sklearn import metrics

    return float(getattr(metrics, name)(labels, predictions, **options))

  return score


def _correlation(name, labels, predictions):
  if np.ptp(labels) == 0 or np.ptp(predictions) == 0:
    return 0.0
  import scipy.stats

  return float(getattr(scipy.stats, name)(labels, predictions)[0])


METRICS = {
  "accuracy": _sklearn_score("accuracy_score"),
  # Binary F1 of label 1 (GLUE's MRPC / QQP: "paraphrase" / "duplicate").
  "f1": _sklearn_score("f1_score", zero_division=0.0),
  "matthews_corrcoef": _sklearn_score("matthews_corrcoef"),
  "pearson": lambda y, p: _correlation("pearsonr", y, p),
  "spearman": lambda y, p: _correlation("spearmanr", y, p),
}


def compute(names, labels, predictions) -> dict[str, float]:
  """The named metrics of ``predictions`` against ``labels``.

  Args:
    names: keys of `METRICS` (a task's official set, e.g. ``GlueLayout.metrics``).
    labels: [N] true label ids, or float scores for regression.
    predictions: [N] predicted label ids, or predicted scores.

  Returns:
    {name: value} in the order of ``names``.
  """
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  return {name: METRICS[name](labels, predictions) for name in names}
