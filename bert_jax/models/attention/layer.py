"""Multi-head self-attention layer: projections around a pure attention kernel.

The kernel is chosen by `ModelConfig.attention_kind`, whose record (`kinds`) says which
projections it reads: queries, keys and values (parameter names follow BERT), or for ``lsh``
one shared query/key projection as the Reformer has (no ``key`` parameter).
"""

import functools

import flax.linen as nn
import jax.numpy as jnp

from bert_jax.models import layers
from bert_jax.models import platform as platform_lib
from bert_jax.models.attention import kernels
from bert_jax.models.attention import kinds as attention_kinds
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
    platform = platform_lib.current_platform()
    # Probabilities are kept only where the caller collects "intermediates" (tools/embed.py).
    keep_probs = self.is_mutable_collection("intermediates")
    kind = attention_kinds.get(config.attention_kind).resolve(
      platform,
      x_BLD.shape[1],
      config.attention_dropout_rate,
      config.head_dim,
      keep_probs=keep_probs,
    )
    heads, packed = self._project(kind, x_BLD, fused=platform != "cpu")
    # Only kernels with attention dropout draw its key (the config refuses a rate for the
    # others but lsh and local, which leave it unused).
    dropout_active = kind.dropout and not self.deterministic and config.attention_dropout_rate > 0
    streams = kind.rngs + (("dropout",) if dropout_active else ())
    sow = functools.partial(self.sow, "intermediates", "attention_probs")
    inputs = kernels.KernelInputs(
      heads=heads,
      packed=packed,
      segment_ids_BL=segment_ids_BL,
      options=config.lsh,
      dropout_rate=config.attention_dropout_rate if dropout_active else 0.0,
      rngs={stream: self.make_rng(stream) for stream in streams},
      sow_probs=sow if keep_probs else None,
    )
    out_BLHD = nn.with_logical_constraint(
      kernels.get(kind.name)(inputs),
      ("activation_batch", "activation_length", "activation_heads", "kv"),
    )
    return OutputProjection(config, name="output")(out_BLHD)

  def _project(self, kind, x_BLD, *, fused: bool):
    """The kind's projections of ``x_BLD``: ([B, L, H, K] arrays, None), or off CPU for a kind
    that reads them packed, ((), (the packed product, its bias)).
    """
    config = self.config
    dtype = jnp.dtype(config.dtype)
    weights = {name: ProjectionWeights(config, name=name)() for name in kind.projections}
    if kind.packed and fused:
      # The flash kernels read the three from the packed product in place (keys and values
      # first, as they write the gradient), adding its bias as they read them.
      kvq_BLNHD, bias_NHD = packed_product(
        x_BLD, (weights["key"], weights["value"], weights["query"]), dtype
      )
      kvq_BLNHD = nn.with_logical_constraint(
        kvq_BLNHD, ("activation_batch", "activation_length", None, "activation_heads", "kv")
      )
      return (), (kvq_BLNHD, bias_NHD)
    first_BLHD, *rest = project_into_heads(x_BLD, tuple(weights.values()), dtype, fused=fused)
    first_BLHD = nn.with_logical_constraint(
      first_BLHD, ("activation_batch", "activation_length", "activation_heads", "kv")
    )
    return (first_BLHD, *rest), None
