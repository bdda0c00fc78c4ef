"""One encoder layer: BERT's post-LN block or the Reformer's reversible pre-LN block.

Both are built from the shared attention layer (`models/attention/layer.py`) and feed-forward
(`models/feed_forward.py`); `models/encoder.py` stacks them.
"""

import flax.linen as nn
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import layers
from bert_jax.models.attention.layer import SelfAttention
from bert_jax.models.config import ModelConfig
from bert_jax.models.dropout import Dropout
from bert_jax.models.feed_forward import chunked_feed_forward, feed_forward_params

ACTIVATION_AXES = (names.ACTIVATION_BATCH, names.ACTIVATION_LENGTH, names.ACTIVATION_EMBED)


def _attention_half(config: ModelConfig, deterministic: bool, x_BLD, segment_ids_BL):
  """LN(x + dropout(attention(x))); its layers become the calling compact module's children."""
  x_BLD = nn.with_logical_constraint(x_BLD, ACTIVATION_AXES)
  attended_BLD = SelfAttention(config, deterministic, name="attention")(x_BLD, segment_ids_BL)
  attended_BLD = Dropout(config.hidden_dropout_rate)(attended_BLD, deterministic=deterministic)
  return layers.layer_norm(config, "attention_norm")(x_BLD + attended_BLD)


def _feed_forward_half(config: ModelConfig, deterministic: bool, h_BLD):
  """LN(h + dropout(FFN(h))); its layers become the calling compact module's children."""
  weights = tuple(holder() for holder in feed_forward_params(config))
  m_BLD = chunked_feed_forward(
    h_BLD,
    weights,
    dtype=jnp.dtype(config.dtype),
    chunk_len=config.ffn_chunk_len,
    activation=layers.activation(config),
  )
  m_BLD = Dropout(config.hidden_dropout_rate)(m_BLD, deterministic=deterministic)
  out_BLD = layers.layer_norm(config, "output_norm")(h_BLD + m_BLD)
  return nn.with_logical_constraint(out_BLD, ACTIVATION_AXES)


class EncoderBlock(nn.Module):
  """One BERT layer: x + Attn(x) -> LN -> h + FFN(h) -> LN (post-LN, as the original)."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, x_BLD, segment_ids_BL):
    h_BLD = _attention_half(self.config, self.deterministic, x_BLD, segment_ids_BL)
    return _feed_forward_half(self.config, self.deterministic, h_BLD)


class AttentionSublayer(nn.Module):
  """The first half of an `EncoderBlock` as its own module, same parameter names (ALBERT's
  attention-only sharing stores it once)."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, x_BLD, segment_ids_BL):
    return _attention_half(self.config, self.deterministic, x_BLD, segment_ids_BL)


class FeedForwardSublayer(nn.Module):
  """The second half of an `EncoderBlock` as its own module, same parameter names."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, h_BLD):
    return _feed_forward_half(self.config, self.deterministic, h_BLD)


class ReversibleBlock(nn.Module):
  """One Reformer layer on two streams: y1 = x1 + F(x2), y2 = x2 + G(y1).

  F = dropout(attention(LN(x))) and G = dropout(FFN(LN(x))), pre-LN as in the Reformer.
  `attend` and `feed_forward` are the halves `reversible.make_reversible_stack` runs;
  ``__call__`` applies both directly (initialisation, and the plain reference in tests).
  """

  config: ModelConfig
  deterministic: bool = True

  def setup(self):
    config = self.config
    self.attention_norm = layers.layer_norm(config, "attention_norm")
    self.attention = SelfAttention(config, self.deterministic, name="attention")
    self.attention_dropout = Dropout(config.hidden_dropout_rate)
    self.output_norm = layers.layer_norm(config, "output_norm")
    self.intermediate, self.output = feed_forward_params(config, scopes=(None, None))
    self.output_dropout = Dropout(config.hidden_dropout_rate)

  def attend(self, x_BLD, segment_ids_BL):
    x_BLD = nn.with_logical_constraint(x_BLD, ACTIVATION_AXES)
    attended_BLD = self.attention(self.attention_norm(x_BLD), segment_ids_BL)
    return self.attention_dropout(attended_BLD, deterministic=self.deterministic)

  def feed_forward(self, x_BLD):
    x_BLD = nn.with_logical_constraint(x_BLD, ACTIVATION_AXES)
    m_BLD = chunked_feed_forward(
      self.output_norm(x_BLD),
      (self.intermediate(), self.output()),
      dtype=jnp.dtype(self.config.dtype),
      chunk_len=self.config.ffn_chunk_len,
      activation=layers.activation(self.config),
    )
    return self.output_dropout(m_BLD, deterministic=self.deterministic)

  def __call__(self, x1_BLD, x2_BLD, segment_ids_BL):
    y1_BLD = x1_BLD + self.attend(x2_BLD, segment_ids_BL)
    return y1_BLD, x2_BLD + self.feed_forward(y1_BLD)
