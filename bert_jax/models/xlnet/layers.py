"""One XLNet / Transformer-XL layer: relative attention for both streams, then the FFN.

Names follow Hugging Face's ``XLNetLayer`` (``rel_attn``, ``ff``; ``q``, ``k``, ``v``, ``o``,
``r``, ``r_w_bias`` = u, ``r_r_bias`` = v, ``r_s_bias`` = s, ``seg_embed``) so the weight table
in `xlnet/hf.py` is mechanical. Projections have no biases, as in XLNet.
"""

import flax.linen as nn
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import layers
from bert_jax.models.attention import relative
from bert_jax.models.config import ModelConfig
from bert_jax.models.dropout import Dropout
from bert_jax.models.recurrence import FeedForward, HeadProjection

_HEAD_AXES = (names.EMBED, names.HEADS, names.KV)


def _project(x_BLD, kernel_DHK, dtype):
  return jnp.einsum("bld,dhk->blhk", x_BLD.astype(dtype), kernel_DHK.astype(dtype))


class RelativeAttention(nn.Module):
  """Multi-head relative attention of XLNet, run for the content and the query stream.

  Both streams share every weight: the keys and values come from ``[memory; h]`` only, so
  the query stream g never contributes content of its own.
  """

  config: ModelConfig
  deterministic: bool = True

  def setup(self):
    config = self.config
    self.q, self.k, self.v, self.o, self.r = (
      HeadProjection(config, name=n) for n in ("q", "k", "v", "o", "r")
    )
    bias = lambda name, *lead: self.param(
      name,
      layers.normal_init(config, (None,) * len(lead) + (names.HEADS, names.KV)),
      lead + (config.num_heads, config.head_dim),
      jnp.float32,
    )
    self.r_w_bias, self.r_r_bias, self.r_s_bias = (
      bias(n) for n in ("r_w_bias", "r_r_bias", "r_s_bias")
    )
    self.seg_embed = bias("seg_embed", 2)
    self.layer_norm = layers.layer_norm(config, "layer_norm")
    self.dropout = Dropout(config.hidden_dropout_rate)

  def _core(self, query_BQHK, key_BKHK, value_BKHK, position_key_PHK, mask_BQK, differs_BQK):
    config = self.config
    active = not self.deterministic and config.attention_dropout_rate > 0
    return relative.relative_attention(
      query_BQHK,
      key_BKHK,
      value_BKHK,
      position_key_PHK,
      self.r_w_bias,
      self.r_r_bias,
      mask_BQK,
      segment_differs_BQK=differs_BQK,
      segment_bias_HD=self.r_s_bias,
      segment_embed_2HD=self.seg_embed,
      dropout_rate=config.attention_dropout_rate,
      dropout_rng=self.make_rng("dropout") if active else None,
      deterministic=not active,
    )

  def _post(self, residual_BLD, attended_BLHK):
    dtype = jnp.dtype(self.config.dtype)
    out_BLD = jnp.einsum("blhk,dhk->bld", attended_BLHK.astype(dtype), self.o().astype(dtype))
    out_BLD = self.dropout(out_BLD, self.deterministic)
    return self.layer_norm(out_BLD + residual_BLD)

  def __call__(self, h_BLD, g_BMD, memory_BND, positions_PD, masks, differs_BQK, mapping_BML):
    """Attends both streams.

    Args:
      h_BLD: the content stream.
      g_BMD: the query stream (one row per prediction), or None.
      memory_BND: this layer's memory (previous segments' inputs), or None.
      positions_PD: relative encodings (`relative.relative_distances` order), after dropout.
      masks: (content mask, query mask), bool [B, L, N + L], True = may attend.
      differs_BQK: bool, True where query and key are in different segments.
      mapping_BML: one-hot target mapping [B, M, L] placing g's rows, or None (g has L rows).

    Returns:
      (h_BLD, g_BMD or None) after attention, residual and LayerNorm.
    """
    dtype = jnp.dtype(self.config.dtype)
    keys_BKD = h_BLD if memory_BND is None else jnp.concatenate([memory_BND, h_BLD], axis=1)
    key_BKHK = _project(keys_BKD, self.k(), dtype)
    value_BKHK = _project(keys_BKD, self.v(), dtype)
    position_key_PHK = _project(positions_PD[None], self.r(), dtype)[0]
    content_mask_BQK, query_mask_BQK = masks
    query_BLHK = _project(h_BLD, self.q(), dtype)
    query_BLHK = nn.with_logical_constraint(
      query_BLHK, (names.ACTIVATION_BATCH, names.ACTIVATION_LENGTH, names.ACTIVATION_HEADS, None)
    )
    attended_BLHK = self._core(
      query_BLHK, key_BKHK, value_BKHK, position_key_PHK, content_mask_BQK, differs_BQK
    )
    h_BLD = self._post(h_BLD, attended_BLHK)
    if g_BMD is None:
      return h_BLD, None
    query_g_BMHK = _project(g_BMD, self.q(), dtype)
    if mapping_BML is not None:
      # Each prediction's query sits at its target's position for the relative shift.
      query_g_BMHK = jnp.einsum("bmhk,bml->blhk", query_g_BMHK, mapping_BML.astype(dtype))
    attended_g = self._core(
      query_g_BMHK, key_BKHK, value_BKHK, position_key_PHK, query_mask_BQK, differs_BQK
    )
    if mapping_BML is not None:
      attended_g = jnp.einsum("blhk,bml->bmhk", attended_g, mapping_BML.astype(dtype))
    return h_BLD, self._post(g_BMD, attended_g)


class XLNetLayer(nn.Module):
  """Relative attention and the FFN, applied to the content stream and the query stream."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, h_BLD, g_BMD, memory_BND, positions_PD, masks, differs_BQK, mapping_BML):
    """Same arguments as `RelativeAttention`; returns the two streams after the layer."""
    h_BLD, g_BMD = RelativeAttention(self.config, self.deterministic, name="rel_attn")(
      h_BLD, g_BMD, memory_BND, positions_PD, masks, differs_BQK, mapping_BML
    )
    ff = FeedForward(self.config, self.deterministic, name="ff")
    activation_axes = (names.ACTIVATION_BATCH, names.ACTIVATION_LENGTH, names.ACTIVATION_EMBED)
    h_BLD = nn.with_logical_constraint(ff(h_BLD), activation_axes)
    return h_BLD, (None if g_BMD is None else ff(g_BMD))
