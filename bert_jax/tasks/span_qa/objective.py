"""Span question answering (SQuAD): start and end logits per token on the shared encoder.

The loss is the mean of the start and the end cross-entropy over the tokens of the row, as in
the original BERT; rows of ``example_weight`` 0 (eval padding) count nowhere. Answer texts and
the official scores come from `postprocess` and `metrics` on the predicted logits.
"""

import dataclasses

import jax.numpy as jnp
import numpy as np
import optax

from bert_jax.models.config import ModelConfig
from bert_jax.tasks.span_qa.model import BertForSpanQa
from bert_jax.tasks.weighted_rows import WeightedRowsTask, encoder_batch


@dataclasses.dataclass(frozen=True)
class SpanQaTask(WeightedRowsTask):
  """Softmax over the row's positions for the answer's start and for its end."""

  model_config: ModelConfig
  max_seq_length: int

  def example_batch(self, batch_size: int):
    """Zero-filled numpy batch with the SQuAD data's schema."""
    positions = np.zeros((batch_size,), np.int32)
    return dict(
      encoder_batch((batch_size, self.max_seq_length), batch_size),
      start_positions=positions,
      end_positions=positions.copy(),
    )

  def model(self, deterministic: bool) -> BertForSpanQa:
    return BertForSpanQa(self.model_config, deterministic=deterministic)

  def loss_and_sums(self, outputs, batch, denominators):
    """Mean over rows of (start CE + end CE) / 2, and loss / accuracy sums."""
    weights_B = batch["example_weight"].astype(jnp.float32)
    sums = {"examples": jnp.sum(weights_B)}
    loss_B = jnp.zeros_like(weights_B)
    for end in ("start", "end"):
      logits_BL = outputs[f"{end}_logits"]
      labels_B = batch[f"{end}_positions"]
      loss_B = loss_B + 0.5 * optax.softmax_cross_entropy_with_integer_labels(logits_BL, labels_B)
      sums[f"{end}_accuracy"] = jnp.sum((jnp.argmax(logits_BL, -1) == labels_B) * weights_B)
    sums["loss"] = jnp.sum(loss_B * weights_B)
    return sums["loss"] / denominators["examples"], sums

  def predictions(self, outputs, batch):
    """The start and end logits of every row, [B, L] each (post-processed on the host)."""
    del batch
    return {"start_logits": outputs["start_logits"], "end_logits": outputs["end_logits"]}


def make_task(model_config: ModelConfig, data_config, data) -> SpanQaTask:
  """The registry's entry point: the head has no size to take from the data."""
  del data
  return SpanQaTask(model_config, data_config.max_seq_length)
