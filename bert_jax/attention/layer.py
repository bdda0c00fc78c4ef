"""Multi-head self-attention layer: projections around a pure attention kernel.

The kernel is chosen by `ModelConfig.attention_kind`. Dense kinds project queries, keys and
values separately (parameter names follow BERT); ``lsh`` shares the query/key projection as the
Reformer does, so it has no ``key`` parameter.
"""

from typing import Callable

import flax.linen as nn
import jax.numpy as jnp

from bert_jax.attention import dense
from bert_jax.models import layers
from bert_jax.models.config import ModelConfig


class Projection(nn.Module):
  """``einsum(x, kernel) + bias`` with the kernel created in its real (per-head) shape.

  Flax's DenseGeneral initialises a flattened kernel and reshapes it, which breaks logical
  sharding constraints under a mesh; creating [embed, heads, head_dim] directly avoids that.
  """
  config: ModelConfig
  equation: str
  kernel_shape: tuple
  kernel_axes: tuple
  bias_shape: tuple
  bias_axes: tuple

  @nn.compact
  def __call__(self, x):
    dtype = jnp.dtype(self.config.dtype)
    kernel = self.param("kernel", layers.normal_init(self.config, self.kernel_axes),
                        self.kernel_shape, jnp.float32)
    bias = self.param("bias", layers.zeros_init(self.bias_axes), self.bias_shape, jnp.float32)
    y = jnp.einsum(self.equation, x.astype(dtype), kernel.astype(dtype))
    return y + bias.astype(dtype).reshape((1,) * (y.ndim - bias.ndim) + bias.shape)


class SelfAttention(nn.Module):
  """Self-attention over [batch, length, embed] activations.

  Attributes:
    config: the model configuration (only attention-related fields are read).
    deterministic: disables dropout.
  """
  config: ModelConfig
  deterministic: bool = True

  def _projection(self, name: str) -> Callable:
    config = self.config
    heads, head_dim = config.num_heads, config.head_dim
    return Projection(config, "bld,dhk->blhk", (config.hidden_size, heads, head_dim),
                      ("embed", "heads", "kv"), (heads, head_dim), ("heads", "kv"), name=name)

  @nn.compact
  def __call__(self, x_BLD, segment_ids_BL):
    config = self.config
    kind = config.attention_kind
    value_BLHD = self._projection("value")(x_BLD)
    if kind == "lsh":
      from bert_jax.attention import lsh  # pylint: disable=g-import-not-at-top
      qk_BLHD = self._projection("query")(x_BLD)
      options = config.lsh
      out_BLHD = lsh.lsh_attention(
          qk_BLHD, value_BLHD, segment_ids_BL, rng=self.make_rng("hashing"),
          n_hashes=options.n_hashes, chunk_len=options.chunk_len,
          n_buckets=options.n_buckets or None, n_chunks_before=options.n_chunks_before,
          n_chunks_after=options.n_chunks_after, causal=options.causal,
          mask_across_buckets=options.mask_across_buckets,
          dedup_correction=options.dedup_correction)
    else:
      query_BLHD = self._projection("query")(x_BLD)
      key_BLHD = self._projection("key")(x_BLD)
      query_BLHD = nn.with_logical_constraint(
          query_BLHD, ("activation_batch", "activation_length", "activation_heads", "kv"))
      if kind == "dense":
        dropout_active = not self.deterministic and config.attention_dropout_rate > 0
        out_BLHD = dense.dense_attention(
            query_BLHD, key_BLHD, value_BLHD, segment_ids_BL,
            dropout_rate=config.attention_dropout_rate,
            dropout_rng=self.make_rng("dropout") if dropout_active else None,
            deterministic=not dropout_active)
      elif kind == "fused":
        out_BLHD = dense.fused_attention(query_BLHD, key_BLHD, value_BLHD, segment_ids_BL)
      else:  # local
        from bert_jax.attention import local  # pylint: disable=g-import-not-at-top
        options = config.lsh
        out_BLHD = local.local_attention(
            query_BLHD, key_BLHD, value_BLHD, segment_ids_BL, chunk_len=options.chunk_len,
            n_chunks_before=options.n_chunks_before, n_chunks_after=options.n_chunks_after,
            causal=options.causal)
    out_BLHD = nn.with_logical_constraint(
        out_BLHD, ("activation_batch", "activation_length", "activation_heads", "kv"))
    return Projection(config, "blhk,hkd->bld", (config.num_heads, config.head_dim,
                                                 config.hidden_size),
                      ("heads", "kv", "embed"), (config.hidden_size,), ("embed",),
                      name="output")(out_BLHD)
