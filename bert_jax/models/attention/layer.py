"""Multi-head self-attention layer: projections around a pure attention kernel.

The kernel is chosen by `ModelConfig.attention_kind`. Dense kinds project queries, keys and
values separately (parameter names follow BERT); ``lsh`` shares the query/key projection as the
Reformer does, so it has no ``key`` parameter.
"""

import math
from collections.abc import Callable

import flax.linen as nn
import jax.numpy as jnp

from bert_jax.models import layers
from bert_jax.models.attention import dense, local, lsh, splash
from bert_jax.models.config import ModelConfig


class Projection(nn.Module):
  """A dense projection whose kernel is created in its real (per-head) shape.

  The kernel is [embed, heads, head_dim] (or [heads, head_dim, embed]) so it can be sharded
  by head; Flax's DenseGeneral initialises a flattened kernel and reshapes it, which breaks
  logical sharding constraints under a mesh. The product itself runs as one 2-D GEMM over the
  ``in_dims`` leading input axes, which XLA:CPU executes faster than a 3-D contraction.
  """

  config: ModelConfig
  kernel_shape: tuple
  kernel_axes: tuple
  bias_shape: tuple
  bias_axes: tuple
  in_dims: int  # How many leading kernel dims contract with the input's trailing dims.

  @nn.compact
  def __call__(self, x):
    dtype = jnp.dtype(self.config.dtype)
    kernel = self.param(
      "kernel", layers.normal_init(self.config, self.kernel_axes), self.kernel_shape, jnp.float32
    )
    bias = self.param("bias", layers.zeros_init(self.bias_axes), self.bias_shape, jnp.float32)
    in_shape, out_shape = self.kernel_shape[: self.in_dims], self.kernel_shape[self.in_dims :]
    batch_shape = x.shape[: x.ndim - self.in_dims]
    x_2d = x.reshape((-1, math.prod(in_shape))).astype(dtype)
    y_2d = x_2d @ kernel.reshape((math.prod(in_shape), math.prod(out_shape))).astype(dtype)
    y_2d = y_2d + bias.astype(dtype).reshape((1, -1))
    return y_2d.reshape(batch_shape + out_shape)


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
    return Projection(
      config,
      (config.hidden_size, heads, head_dim),
      ("embed", "heads", "kv"),
      (heads, head_dim),
      ("heads", "kv"),
      in_dims=1,
      name=name,
    )

  @nn.compact
  def __call__(self, x_BLD, segment_ids_BL):
    config = self.config
    kind = config.attention_kind
    if kind == "auto":
      kind = splash.auto_kind(
        splash.current_platform(), x_BLD.shape[1], config.attention_dropout_rate
      )
    value_BLHD = self._projection("value")(x_BLD)
    if kind == "lsh":
      qk_BLHD = self._projection("query")(x_BLD)
      options = config.lsh
      out_BLHD = lsh.lsh_attention(
        qk_BLHD,
        value_BLHD,
        segment_ids_BL,
        rng=self.make_rng("hashing"),
        n_hashes=options.n_hashes,
        chunk_len=options.chunk_len,
        n_buckets=options.n_buckets or None,
        n_chunks_before=options.n_chunks_before,
        n_chunks_after=options.n_chunks_after,
        causal=options.causal,
        mask_across_buckets=options.mask_across_buckets,
        dedup_correction=options.dedup_correction,
      )
    else:
      query_BLHD = self._projection("query")(x_BLD)
      key_BLHD = self._projection("key")(x_BLD)
      query_BLHD = nn.with_logical_constraint(
        query_BLHD, ("activation_batch", "activation_length", "activation_heads", "kv")
      )
      dropout_active = not self.deterministic and config.attention_dropout_rate > 0
      # Probabilities are kept only where the caller collects "intermediates" (tools/embed.py).
      keep_probs = self.is_mutable_collection("intermediates")
      if kind == "dense" and not (dropout_active or keep_probs):
        out_BLHD = dense.dense_attention_vjp(query_BLHD, key_BLHD, value_BLHD, segment_ids_BL)
      elif kind == "dense":
        out_BLHD, probs_BHQK = dense.dense_attention(
          query_BLHD,
          key_BLHD,
          value_BLHD,
          segment_ids_BL,
          dropout_rate=config.attention_dropout_rate,
          dropout_rng=self.make_rng("dropout") if dropout_active else None,
          deterministic=not dropout_active,
          return_probs=True,
        )
        self.sow("intermediates", "attention_probs", probs_BHQK)
      elif kind == "fused":
        out_BLHD = dense.fused_attention(query_BLHD, key_BLHD, value_BLHD, segment_ids_BL)
      elif kind == "splash":
        out_BLHD = splash.splash_attention(query_BLHD, key_BLHD, value_BLHD, segment_ids_BL)
      else:  # local
        options = config.lsh
        out_BLHD = local.local_attention(
          query_BLHD,
          key_BLHD,
          value_BLHD,
          segment_ids_BL,
          chunk_len=options.chunk_len,
          n_chunks_before=options.n_chunks_before,
          n_chunks_after=options.n_chunks_after,
          causal=options.causal,
        )
    out_BLHD = nn.with_logical_constraint(
      out_BLHD, ("activation_batch", "activation_length", "activation_heads", "kv")
    )
    return Projection(
      config,
      (config.num_heads, config.head_dim, config.hidden_size),
      ("heads", "kv", "embed"),
      (config.hidden_size,),
      ("embed",),
      in_dims=2,
      name="output",
    )(out_BLHD)
