"""Multi-head self-attention layer: projections around a pure attention kernel.

The kernel is chosen by `ModelConfig.attention_kind`. Dense kinds project queries, keys and
values separately (parameter names follow BERT); ``lsh`` shares the query/key projection as the
Reformer does, so it has no ``key`` parameter.
"""

import flax.linen as nn
import jax.numpy as jnp

from bert_jax.models import layers
from bert_jax.models import platform as platform_lib
from bert_jax.models.attention import auto, cudnn, dense, flash, local, lsh, splash
from bert_jax.models.config import ModelConfig


class ProjectionWeights(nn.Module):
  """The float32 kernel and bias of a projection into heads, created in their per-head shapes.

  The kernel is [embed, heads, head_dim] so it can be sharded by head (Flax's DenseGeneral
  initialises a flattened kernel and reshapes it, which breaks logical sharding constraints
  under a mesh). Returned as arrays so several projections of one input can run as one
  product (`project_into_heads`); the parameter names are BERT's (``<name>/kernel``, ``bias``).
  """

  config: ModelConfig

  @nn.compact
  def __call__(self):
    config = self.config
    shape = (config.num_heads, config.head_dim)
    kernel = self.param(
      "kernel",
      layers.normal_init(config, ("embed", "heads", "kv")),
      (config.hidden_size,) + shape,
      jnp.float32,
    )
    return kernel, self.param("bias", layers.zeros_init(("heads", "kv")), shape, jnp.float32)


def project_into_heads(x_BLD, weights, dtype, *, fused: bool):
  """``x @ kernel + bias`` for each (kernel [D, H, K], bias [H, K]) of ``weights``.

  ``fused``: one contraction to [B, L, n, H, K], which reads the input once (its backward
  writes one input gradient, not n to be added) and leaves the compiler free to lay the result
  out heads-major for the attention products that follow: on a TPU v5p compile of BERT-base
  (bf16, batch 256 x 128) it moves ~1 GB less per layer and step than 2-D GEMMs reshaped into
  heads. Otherwise one 2-D GEMM per projection, which XLA:CPU runs faster (fwd+bwd of
  BERT-base's three at batch 8 x 128: 49 ms of CPU time against 77 ms fused). Same maths.

  Returns:
    A tuple of [B, L, H, K] arrays in ``dtype``, one per entry of ``weights``.
  """
  if not fused:
    width = x_BLD.shape[-1]
    x_2d = x_BLD.reshape((-1, width)).astype(dtype)
    return tuple(
      layers.add_bias(
        (x_2d @ kernel.reshape((width, -1)).astype(dtype)).reshape(x_BLD.shape[:-1] + bias.shape),
        bias,
      )
      for kernel, bias in weights
    )
  y_BLNHK, bias_NHK = packed_product(x_BLD, weights, dtype)
  y_BLNHK = layers.add_bias(y_BLNHK, bias_NHK)
  return tuple(y_BLNHK[:, :, i] for i in range(len(weights)))


def packed_product(x_BLD, weights, dtype):
  """`project_into_heads`'s fused contraction [B, L, n, H, K] before its bias, and the biases
  [n, H, K] (float32) for the consumer to add."""
  kernel_DNHK = jnp.stack([kernel for kernel, _ in weights], axis=1).astype(dtype)
  bias_NHK = jnp.stack([bias for _, bias in weights])
  return jnp.einsum("bld,dnhk->blnhk", x_BLD.astype(dtype), kernel_DNHK), bias_NHK


class OutputProjection(nn.Module):
  """The projection out of heads: [..., heads, head_dim] -> [..., embed].

  The kernel is [heads, head_dim, embed] (sharded by head); the product runs as one 2-D GEMM
  over the two head axes, which XLA:CPU executes faster than a 3-D contraction (and which a
  TPU compile moves no more bytes for).
  """

  config: ModelConfig

  @nn.compact
  def __call__(self, x):
    config = self.config
    dtype = jnp.dtype(config.dtype)
    heads, head_dim, width = config.num_heads, config.head_dim, config.hidden_size
    kernel = self.param(
      "kernel",
      layers.normal_init(config, ("heads", "kv", "embed")),
      (heads, head_dim, width),
      jnp.float32,
    )
    bias = self.param("bias", layers.zeros_init(("embed",)), (width,), jnp.float32)
    batch_shape = x.shape[:-2]
    x_2d = x.reshape((-1, heads * head_dim)).astype(dtype)
    y_2d = x_2d @ kernel.reshape((heads * head_dim, width)).astype(dtype)
    return layers.add_bias(y_2d, bias).reshape(batch_shape + (width,))


class SelfAttention(nn.Module):
  """Self-attention over [batch, length, embed] activations.

  Attributes:
    config: the model configuration (only attention-related fields are read).
    deterministic: disables dropout.
  """

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, x_BLD, segment_ids_BL):
    config = self.config
    kind = config.attention_kind
    platform = platform_lib.current_platform()
    # Probabilities are kept only where the caller collects "intermediates" (tools/embed.py),
    # and only the dense kernel has them.
    keep_probs = self.is_mutable_collection("intermediates")
    if kind == "auto" and keep_probs:
      kind = "dense"
    elif kind == "auto":
      kind = auto.auto_kind(
        platform, x_BLD.shape[1], config.attention_dropout_rate, config.head_dim
      )
    dtype = jnp.dtype(config.dtype)
    fused = platform != "cpu"
    if kind == "lsh":
      # The Reformer shares the query/key projection: no key parameters.
      qk_BLHD, value_BLHD = project_into_heads(
        x_BLD,
        (ProjectionWeights(config, name="query")(), ProjectionWeights(config, name="value")()),
        dtype,
        fused=fused,
      )
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
      weights = tuple(ProjectionWeights(config, name=n)() for n in ("query", "key", "value"))
      # Off CPU the flash kernels read the three from the packed product in place (keys and
      # values first, as they write the gradient), adding its bias as they read them.
      packed = kind == "flash" and fused
      if packed:
        query, key, value = weights
        kvq_BLNHD, bias_NHD = packed_product(x_BLD, (key, value, query), dtype)
        kvq_BLNHD = nn.with_logical_constraint(
          kvq_BLNHD, ("activation_batch", "activation_length", None, "activation_heads", "kv")
        )
      else:
        query_BLHD, key_BLHD, value_BLHD = project_into_heads(x_BLD, weights, dtype, fused=fused)
        query_BLHD = nn.with_logical_constraint(
          query_BLHD, ("activation_batch", "activation_length", "activation_heads", "kv")
        )
      # The dense and flash kernels have attention dropout (the config refuses a rate for the
      # fused, splash and cudnn kinds; local has none), so only they draw a key.
      dropout_active = (
        not self.deterministic and config.attention_dropout_rate > 0 and kind in ("dense", "flash")
      )
      dropout_rate = config.attention_dropout_rate if dropout_active else 0.0
      dropout_rng = self.make_rng("dropout") if dropout_active else None
      if packed:
        out_BLHD = flash.flash_attention_packed(
          kvq_BLNHD,
          segment_ids_BL,
          bias_NHD=bias_NHD,
          dropout_rate=dropout_rate,
          dropout_rng=dropout_rng,
        )
      elif kind == "flash" or (kind == "dense" and not keep_probs):
        attend = flash.flash_attention if kind == "flash" else dense.dense_attention_vjp
        out_BLHD = attend(
          query_BLHD,
          key_BLHD,
          value_BLHD,
          segment_ids_BL,
          dropout_rate=dropout_rate,
          dropout_rng=dropout_rng,
        )
      elif kind == "dense":
        out_BLHD, probs_BHQK = dense.dense_attention(
          query_BLHD,
          key_BLHD,
          value_BLHD,
          segment_ids_BL,
          dropout_rate=dropout_rate,
          dropout_rng=dropout_rng,
          deterministic=not dropout_active,
          return_probs=True,
        )
        self.sow("intermediates", "attention_probs", probs_BHQK)
      elif kind == "fused":
        out_BLHD = dense.fused_attention(query_BLHD, key_BLHD, value_BLHD, segment_ids_BL)
      elif kind == "cudnn":
        out_BLHD = cudnn.cudnn_attention(query_BLHD, key_BLHD, value_BLHD, segment_ids_BL)
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
    return OutputProjection(config, name="output")(out_BLHD)
