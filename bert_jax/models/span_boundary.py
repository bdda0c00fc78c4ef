"""SpanBERT's span boundary objective (SBO, Joshi et al. 2020), for any family's pretraining.

Each masked token x_i of a span s..e is predicted a second time, from the encoder outputs at
the boundary tokens x_{s-1} and x_{e+1} and an embedding of its offset i - s inside the span,
through a 2-layer feed-forward network (GELU + LayerNorm after each layer) and the tied word
table. A span is a run of consecutive masked positions: the pipeline's ``masked_lm_positions``
are sorted, so the spans (and so the boundaries) follow from the positions alone and every
masking strategy has them (``span`` and ``ngram`` give multi-token spans, ``token`` mostly
single tokens). `models/config.py`'s ``span_boundary.enabled`` turns the head on.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import layers
from bert_jax.models.config import ModelConfig


def span_boundaries(positions_BP, length: int):
  """The boundary positions and in-span offset of every prediction slot.

  Args:
    positions_BP: int masked positions, increasing along P for the real slots; padding slots
      (position 0 after the real ones) come out as one-token spans and are weighted out later.
    length: L, the sequence length (boundaries are clipped to [0, L-1]).

  Returns:
    ``(left_BP, right_BP, offset_BP)``: s - 1 and e + 1 of the slot's span, and i - s.
  """
  num_slots = positions_BP.shape[1]
  previous_BP = jnp.concatenate([positions_BP[:, :1] - 2, positions_BP[:, :-1]], axis=1)
  following_BP = jnp.concatenate([positions_BP[:, 1:], positions_BP[:, -1:] + 2], axis=1)
  starts_BP = positions_BP != previous_BP + 1
  ends_BP = positions_BP != following_BP - 1
  slot_BP = jnp.broadcast_to(jnp.arange(num_slots)[None, :], positions_BP.shape)
  # Each slot's span starts at the last start at or before it and ends at the first end after.
  start_slot_BP = jax.lax.cummax(jnp.where(starts_BP, slot_BP, 0), axis=1)
  end_slot_BP = jax.lax.cummin(jnp.where(ends_BP, slot_BP, num_slots - 1), axis=1, reverse=True)
  start_BP = jnp.take_along_axis(positions_BP, start_slot_BP, axis=1)
  end_BP = jnp.take_along_axis(positions_BP, end_slot_BP, axis=1)
  left_BP = jnp.clip(start_BP - 1, 0, length - 1)
  right_BP = jnp.clip(end_BP + 1, 0, length - 1)
  return left_BP, right_BP, positions_BP - start_BP


class SpanBoundaryHead(nn.Module):
  """Logits over the vocabulary for each masked slot from its span's boundary outputs.

  Attributes:
    config: the model configuration.
    width: width of the word table ``attend`` multiplies by; 0 = hidden_size.
  """

  config: ModelConfig
  width: int = 0

  @nn.compact
  def __call__(self, x_BLD, positions_BP, attend):
    """float32 [B, P, V] logits; reads ``x_BLD`` only at the boundaries of each slot's span."""
    config = self.config
    left_BP, right_BP, offset_BP = span_boundaries(positions_BP, x_BLD.shape[1])
    left_BPD = jnp.take_along_axis(x_BLD, left_BP[:, :, None], axis=1)
    right_BPD = jnp.take_along_axis(x_BLD, right_BP[:, :, None], axis=1)
    offsets = layers.embedding_table(
      config,
      config.span_boundary.max_offset,
      config.hidden_size,
      (names.POSITIONS, names.EMBED),
      "position_embeddings",
    )
    offset_BPD = offsets(jnp.minimum(offset_BP, config.span_boundary.max_offset - 1))
    h_BPX = jnp.concatenate([left_BPD, right_BPD, offset_BPD.astype(left_BPD.dtype)], axis=-1)
    activation = layers.activation(config)
    h_BPD = activation(
      layers.dense(config, config.hidden_size, (names.MLP, names.EMBED), "dense_0")(h_BPX)
    )
    h_BPD = layers.layer_norm(config, "norm_0")(h_BPD)
    width = self.width or config.hidden_size
    h_BPE = activation(layers.dense(config, width, (names.MLP, names.EMBED), "dense_1")(h_BPD))
    h_BPE = layers.layer_norm(config, "norm_1")(h_BPE)
    bias_V = self.param(
      "output_bias", layers.zeros_init((names.VOCAB,)), (config.vocab_size,), jnp.float32
    )
    return attend(h_BPE) + bias_V[None, None, :]


def add_logits(config: ModelConfig, outputs, x_BLD, positions_BP, attend, width: int = 0):
  """``outputs`` plus ``sbo_logits`` when the config asks for the objective.

  Call from a pretraining model's compact ``__call__`` (the head is created under ``sbo_head``).
  Without positions (every position predicted, for inspection) there are no spans: no head.
  """
  if not config.span_boundary.enabled or positions_BP is None:
    return outputs
  head = SpanBoundaryHead(config, width, name="sbo_head")
  return {**outputs, "sbo_logits": head(x_BLD, positions_BP, attend)}
