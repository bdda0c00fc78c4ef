"""Classification and regression metrics (GLUE's): wrappers over scikit-learn and scipy.

Scores that are undefined on degenerate inputs (a correlation when the predictions or labels
are constant) are reported as 0.0, the score of an uninformative predictor, so every metric
stays a finite number in metrics.jsonl; F1 with no positive prediction is 0.0 likewise.
"""

import numpy as np
import scipy.stats
from sklearn import metrics as sk_metrics


def _correlation(function, labels, predictions):
  if np.ptp(labels) == 0 or np.ptp(predictions) == 0:
    return 0.0
  return float(function(labels, predictions)[0])


METRICS = {
  "accuracy": lambda y, p: float(sk_metrics.accuracy_score(y, p)),
  # Binary F1 of label 1 (GLUE's MRPC / QQP: "paraphrase" / "duplicate").
  "f1": lambda y, p: float(sk_metrics.f1_score(y, p, zero_division=0.0)),
  "matthews_corrcoef": lambda y, p: float(sk_metrics.matthews_corrcoef(y, p)),
  "pearson": lambda y, p: _correlation(scipy.stats.pearsonr, y, p),
  "spearman": lambda y, p: _correlation(scipy.stats.spearmanr, y, p),
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
