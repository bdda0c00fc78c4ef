"""One Transformer-XL layer (Dai et al. 2019): relative attention with memory, then a ReLU FFN.

Names follow Hugging Face's ``RelPartialLearnableDecoderLayer`` so the weight table in
`transformer_xl/hf.py` is mechanical: ``rel_attn`` holds the fused ``qkv``
projection ([embed, 3 * heads, head_dim]: the queries' heads, then the keys', then the
values', as transformers' ``qkv_net`` chunks them), ``o``, ``r`` (the projection of the
sinusoidal encodings), the biases ``r_w_bias`` = u and ``r_r_bias`` = v (per layer with
``untie_r``, else the trunk's) and ``layer_norm``; ``ff`` holds ``layer_1``, ``layer_2`` and
``layer_norm``. No attention projection has a bias. The score kernel is XLNet's
(`attention/relative.py`) without the segment term.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import layers
from bert_jax.models.attention import relative
from bert_jax.models.config import ModelConfig
from bert_jax.models.dropout import Dropout
from bert_jax.models.recurrence import FeedForward, HeadProjection


class FusedQkv(nn.Module):
  """The bias-free [embed, 3 * heads, head_dim] kernel of the queries, keys and values."""

  config: ModelConfig

  @nn.compact
  def __call__(self):
    config = self.config
    shape = (config.hidden_size, 3 * config.num_heads, config.head_dim)
    axes = (names.EMBED, names.HEADS, names.KV)
    return self.param("kernel", layers.normal_init(config, axes), shape, jnp.float32)


class RelativeAttention(nn.Module):
  """Multi-head relative attention over ``[memory; h]`` with residual and LayerNorm.

  Attributes:
    config: the model configuration (``pre_layer_norm`` is read here).
    deterministic: disables dropout.
  """

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, h_BLD, memory_BND, positions_PD, mask_BLK, biases):
    """Attends h's queries to the keys of ``[memory; h]``.

    Args:
      h_BLD: this layer's input.
      memory_BND: this layer's memory (earlier segments' inputs of this layer), or None.
      positions_PD: sinusoidal encodings of `relative.relative_distances`, after dropout.
      mask_BLK: bool [B, L, N + L], True = may attend.
      biases: (r_w_bias, r_r_bias) [heads, head_dim], or None for this layer's own.

    Returns:
      h_BLD after attention and the residual (and the LayerNorm, unless pre-LN).
    """
    config = self.config
    dtype = jnp.dtype(config.dtype)
    heads, head_dim = config.num_heads, config.head_dim
    if biases is None:
      bias = lambda name: self.param(
        name, layers.normal_init(config, (names.HEADS, names.KV)), (heads, head_dim), jnp.float32
      )
      biases = (bias("r_w_bias"), bias("r_r_bias"))
    layer_norm = layers.layer_norm(config, "layer_norm")
    keys_BKD = h_BLD if memory_BND is None else jnp.concatenate([memory_BND, h_BLD], axis=1)
    if config.pre_layer_norm:
      # transformers normalises memory and current inputs together before projecting them.
      keys_BKD = layer_norm(keys_BKD)
    qkv_D3HK = FusedQkv(config, name="qkv")().astype(dtype)
    qkv_BK3HK = jnp.einsum("bkd,dhe->bkhe", keys_BKD.astype(dtype), qkv_D3HK)
    qkv_BK3HK = qkv_BK3HK.reshape(qkv_BK3HK.shape[:2] + (3, heads, head_dim))
    query_BLHK = qkv_BK3HK[:, -h_BLD.shape[1] :, 0]
    query_BLHK = nn.with_logical_constraint(
      query_BLHK, (names.ACTIVATION_BATCH, names.ACTIVATION_LENGTH, names.ACTIVATION_HEADS, None)
    )
    position_key_PHK = jnp.einsum(
      "pd,dhk->phk", positions_PD.astype(dtype), HeadProjection(config, name="r")().astype(dtype)
    )
    active = not self.deterministic and config.attention_dropout_rate > 0
    attended_BLHK = relative.relative_attention(
      query_BLHK,
      qkv_BK3HK[:, :, 1],
      qkv_BK3HK[:, :, 2],
      position_key_PHK,
      biases[0],
      biases[1],
      mask_BLK,
      dropout_rate=config.attention_dropout_rate,
      dropout_rng=self.make_rng("dropout") if active else None,
      deterministic=not active,
    )
    out_BLD = jnp.einsum(
      "blhk,dhk->bld", attended_BLHK.astype(dtype), HeadProjection(config, name="o")().astype(dtype)
    )
    out_BLD = Dropout(config.hidden_dropout_rate)(out_BLD, self.deterministic)
    if config.pre_layer_norm:
      return h_BLD + out_BLD
    return layer_norm(h_BLD + out_BLD)


class TransformerXLLayer(nn.Module):
  """Relative attention over ``[memory; h]``, then the FFN."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, h_BLD, memory_BND, positions_PD, mask_BLK, biases):
    """Same arguments as `RelativeAttention`; returns the layer's output [B, L, D]."""
    h_BLD = RelativeAttention(self.config, self.deterministic, name="rel_attn")(
      h_BLD, memory_BND, positions_PD, mask_BLK, biases
    )
    config = self.config
    h_BLD = FeedForward(config, self.deterministic, jax.nn.relu, config.pre_layer_norm, name="ff")(
      h_BLD
    )
    activation_axes = (names.ACTIVATION_BATCH, names.ACTIVATION_LENGTH, names.ACTIVATION_EMBED)
    return nn.with_logical_constraint(h_BLD, activation_axes)
