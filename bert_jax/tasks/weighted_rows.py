"""What every fine-tuning task shares: encoder inputs, and rows weighted by ``example_weight``.

Fine-tuning batches carry ``example_weight`` (0 for the padding rows that fill the last eval
batch) and ``row_id`` (the row's index in the eval set, -1 for padding); losses and metric sums
weight every row by it, so padding counts nowhere.
"""

import jax.numpy as jnp
import numpy as np

from bert_jax.tasks.interface import TaskDefaults


def encoder_batch(shape, batch_size: int) -> dict:
  """Zero-filled encoder inputs of ``shape`` (e.g. [B, L] or [B, C, L]) plus row weights/ids."""
  return {
    "input_ids": np.zeros(shape, np.int32),
    "token_type_ids": np.zeros(shape, np.int32),
    "input_mask": np.ones(shape, np.int32),
    "example_weight": np.zeros((batch_size,), np.float32),
    "row_id": np.full((batch_size,), -1, np.int32),
  }


class WeightedRowsTask(TaskDefaults):
  """Base of a fine-tuning task: the encoder's inputs, losses and metrics averaged over the real
  rows, and per-row predictions (`interface.PredictingTask`) that its data object scores.

  A task whose unit is the row (classification, span QA, multiple choice) reports every sum
  divided by ``sums["examples"]``; tagging overrides the denominators with its scored tokens.
  """

  predicts = True

  def model_inputs(self, batch):
    return batch["input_ids"], batch["token_type_ids"], batch["input_mask"]

  def denominators(self, batch):
    """Real rows of the global batch."""
    return {"examples": jnp.maximum(jnp.sum(batch["example_weight"]), 1.0)}

  def metrics_from_sums(self, sums):
    """Per-example means of every sum."""
    examples = max(float(sums["examples"]), 1.0)
    return {key: float(sums[key]) / examples for key in sums if key != "examples"}
