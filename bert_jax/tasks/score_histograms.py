"""Area under the ROC curve from per-class histograms of predicted probabilities.

A metric that must be summed over steps, devices and hosts cannot keep every score; like
``tf.metrics.auc`` (which ELECTRA's reference code logs as ``disc_auc``), it keeps counts of the
positive and negative examples in fixed probability buckets. The sums add exactly across batches,
and the AUC computed from them differs from the exact one only by pairs that share a bucket
(counted as half-correct), at most 1 / ``NUM_BUCKETS`` of the positive-negative pairs per bucket.
"""

import jax
import jax.numpy as jnp
import numpy as np

NUM_BUCKETS = 1000


def probability_histograms(logits, labels, weights):
  """Weighted counts of positives and of negatives per sigmoid-probability bucket.

  Args:
    logits: float array of any shape; the predicted log-odds of the positive class.
    labels: array of the same shape, 1 for positive, 0 for negative.
    weights: array of the same shape; 0 leaves an element out (padding).

  Returns:
    ``(positive_counts, negative_counts)``, float32 [NUM_BUCKETS] each; bucket ``i`` holds the
    probabilities in ``[i / NUM_BUCKETS, (i + 1) / NUM_BUCKETS)`` (1.0 goes to the last).
  """
  probabilities = jax.nn.sigmoid(logits.astype(jnp.float32)).reshape(-1)
  buckets = jnp.clip(jnp.floor(probabilities * NUM_BUCKETS), 0, NUM_BUCKETS - 1).astype(jnp.int32)
  labels = labels.astype(jnp.float32).reshape(-1)
  weights = weights.astype(jnp.float32).reshape(-1)
  empty = jnp.zeros((NUM_BUCKETS,), jnp.float32)
  return (
    empty.at[buckets].add(labels * weights),
    empty.at[buckets].add((1.0 - labels) * weights),
  )


def auc_from_histograms(positive_counts, negative_counts) -> float:
  """P(a positive scores above a negative), ties (same bucket) counted half; 0.5 if a class is empty."""
  positive_counts = np.asarray(positive_counts, np.float64)
  negative_counts = np.asarray(negative_counts, np.float64)
  positives, negatives = positive_counts.sum(), negative_counts.sum()
  if positives == 0 or negatives == 0:
    return 0.5
  negatives_below = np.cumsum(negative_counts) - negative_counts
  wins = np.sum(positive_counts * (negatives_below + 0.5 * negative_counts))
  return float(wins / (positives * negatives))
