"""Token classification (NER, POS, chunking): a per-token label head on the shared encoder.

Only positions with ``label_weights`` 1 (each word's first sub-word, see
`features`) count in the loss and the metrics; rows of ``example_weight``
0 (eval padding) count nowhere.
"""

import dataclasses

import jax.numpy as jnp
import numpy as np
import optax

from bert_jax.models.config import ModelConfig
from bert_jax.tasks.tagging.model import BertForTokenTagging
from bert_jax.tasks.weighted_rows import WeightedRowsTask, encoder_batch


@dataclasses.dataclass(frozen=True)
class TaggingTask(WeightedRowsTask):
  """Per-token softmax cross-entropy over ``num_labels`` labels at the weighted positions."""

  model_config: ModelConfig
  max_seq_length: int
  num_labels: int

  def example_batch(self, batch_size: int):
    """Zero-filled numpy batch with the tagging data's schema."""
    shape = (batch_size, self.max_seq_length)
    return dict(
      encoder_batch(shape, batch_size),
      label_ids=np.zeros(shape, np.int32),
      label_weights=np.zeros(shape, np.float32),
    )

  def model(self, deterministic: bool) -> BertForTokenTagging:
    return BertForTokenTagging(self.model_config, self.num_labels, deterministic=deterministic)

  def _weights(self, batch):
    return batch["label_weights"].astype(jnp.float32) * batch["example_weight"][:, None]

  def denominators(self, batch):
    """Scored tokens of the global batch."""
    return {"tokens": jnp.maximum(jnp.sum(self._weights(batch)), 1.0)}

  def loss_and_sums(self, outputs, batch, denominators):
    """Mean cross-entropy over the scored tokens, and loss / accuracy sums."""
    weights_BL = self._weights(batch)
    logits_BLK = outputs["logits"]
    labels_BL = batch["label_ids"]
    ce_BL = optax.softmax_cross_entropy_with_integer_labels(logits_BLK, labels_BL)
    sums = {
      "loss": jnp.sum(ce_BL * weights_BL),
      "token_accuracy": jnp.sum((jnp.argmax(logits_BLK, -1) == labels_BL) * weights_BL),
      "tokens": jnp.sum(weights_BL),
    }
    return sums["loss"] / denominators["tokens"], sums

  def metrics_from_sums(self, sums):
    tokens = max(float(sums["tokens"]), 1.0)
    return {
      "loss": float(sums["loss"]) / tokens,
      "token_accuracy": float(sums["token_accuracy"]) / tokens,
    }

  def predictions(self, outputs, batch):
    """The most likely label id at every position, [B, L] (scored ones are read back)."""
    del batch
    return {"label_ids": jnp.argmax(outputs["logits"], -1).astype(jnp.int32)}


def make_task(model_config: ModelConfig, data_config, data) -> TaggingTask:
  """The registry's entry point: one output per label of the data's tag set."""
  return TaggingTask(model_config, data_config.max_seq_length, len(data.label_names))
