"""Small building blocks shared by the embeddings, encoder blocks and heads."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.models import layer_norm as layer_norm_lib
from bert_jax.models.config import ModelConfig
from bert_jax.models.embedding_table import EmbeddingTable


def normal_init(config: ModelConfig, axes):
  """BERT's N(0, initializer_range) initialiser, annotated with logical axes."""
  return nn.with_logical_partitioning(nn.initializers.normal(stddev=config.initializer_range), axes)


def embedding_table(config: ModelConfig, rows: int, width: int, axes, name=None, init=None):
  """An `EmbeddingTable` (float32 table, rows in the config's dtype) with logical axes.

  Args:
    config: the model config (dtype, initializer_range).
    rows: rows of the table.
    width: features of a row.
    axes: logical axes of the table.
    name: module name (default: the attribute it is assigned to).
    init: initialiser; default BERT's N(0, initializer_range).
  """
  return EmbeddingTable(
    rows,
    width,
    dtype=jnp.dtype(config.dtype),
    embedding_init=nn.with_logical_partitioning(init, axes) if init else normal_init(config, axes),
    name=name,
  )


@jax.custom_vjp
def add_bias(y, bias):
  """``y + bias`` in ``y``'s dtype, ``bias`` [trailing dims of y] broadcast over the rest.

  The bias's gradient is summed over the broadcast axes in float32. Autodiff would sum it in
  ``y``'s dtype (the transpose of a broadcast is a plain reduce, without `jnp.sum`'s float32
  upcast), and a compiled bf16 step on a GPU keeps such a reduce's bf16 adder: 32,768 rows of a
  BERT-base batch summed in bf16.
  """
  return y + bias.astype(y.dtype).reshape((1,) * (y.ndim - bias.ndim) + bias.shape)


def _add_bias_forward(y, bias):
  # An empty array of the bias's rank and dtype: all the backward needs of it.
  return add_bias(y, bias), jnp.zeros((0,) * bias.ndim, bias.dtype)


def _add_bias_backward(bias_like, d_y):
  broadcast_axes = tuple(range(d_y.ndim - bias_like.ndim))
  d_bias = jnp.sum(d_y.astype(jnp.float32), axis=broadcast_axes)
  return d_y, d_bias.astype(bias_like.dtype)


add_bias.defvjp(_add_bias_forward, _add_bias_backward)


@jax.custom_vjp
def tied_logits(table_VD, x_BPD):
  """Logits over the vocabulary through the tied word table: float32 [..., V].

  The product runs in ``x``'s dtype (the compute dtype) and accumulates and returns float32,
  so the softmax and loss see float32 logits. Its backward casts the logits' gradient back to
  the compute dtype before the two products, as for any other layer; autodiff would keep it
  float32 ([tokens, V]: 625 MB for BERT-base's 5,120 predictions a step), and a bf16 GPU step
  then ran the input gradient as a float32 GEMM against the float32 table (1.9 ms of a 62 ms
  H200 step).

  Args:
    table_VD: the float32 word table [V, D].
    x_BPD: hidden states [..., D] in the compute dtype.
  """
  return jnp.einsum(
    "...d,vd->...v", x_BPD, table_VD.astype(x_BPD.dtype), preferred_element_type=jnp.float32
  )


def _tied_logits_forward(table_VD, x_BPD):
  return tied_logits(table_VD, x_BPD), (table_VD, x_BPD)


def _tied_logits_backward(residuals, d_logits_BPV):
  table_VD, x_BPD = residuals
  d_logits_BPV = d_logits_BPV.astype(x_BPD.dtype)
  d_x_BPD = jnp.einsum(
    "...v,vd->...d",
    d_logits_BPV,
    table_VD.astype(x_BPD.dtype),
    preferred_element_type=jnp.float32,
  )
  d_table_VD = jnp.einsum("...v,...d->vd", d_logits_BPV, x_BPD, preferred_element_type=jnp.float32)
  return d_table_VD.astype(table_VD.dtype), d_x_BPD.astype(x_BPD.dtype)


tied_logits.defvjp(_tied_logits_forward, _tied_logits_backward)


def zeros_init(axes):
  return nn.with_logical_partitioning(nn.initializers.zeros_init(), axes)


class Dense(nn.Module):
  """`nn.Dense`'s parameters and maths, its bias added by `add_bias` (gradient summed in
  float32).

  Attributes:
    features: output width.
    dtype: compute dtype of the product and the output.
    kernel_init: initialiser of the float32 kernel [input width, features].
    bias_init: initialiser of the float32 bias [features].
  """

  features: int
  dtype: jnp.dtype
  kernel_init: object
  bias_init: object

  @nn.compact
  def __call__(self, x):
    kernel = self.param("kernel", self.kernel_init, (x.shape[-1], self.features), jnp.float32)
    bias = self.param("bias", self.bias_init, (self.features,), jnp.float32)
    return add_bias(x.astype(self.dtype) @ kernel.astype(self.dtype), bias)


def dense(config: ModelConfig, features: int, axes, name: str) -> Dense:
  """A Dense layer with float32 params, compute in the config's dtype and logical axes."""
  return Dense(
    features,
    dtype=jnp.dtype(config.dtype),
    kernel_init=normal_init(config, axes),
    bias_init=zeros_init(axes[-1:]),
    name=name,
  )


def layer_norm(config: ModelConfig, name: str) -> nn.Module:
  """LayerNorm with float32 params and statistics for any input.

  With ``scan_layers`` or ``layer_norm_kind='triton'``, `layer_norm.LayerNorm`, whose
  backward keeps no float32 copy of its input (the scanned body's residuals are JAX's choice,
  stacked per layer), computed by XLA or by Triton kernels; otherwise Flax's, whose float32
  intermediates XLA recomputes where they are read. Same parameters and outputs.
  """
  scale_init = nn.with_logical_partitioning(nn.initializers.ones_init(), ("norm",))
  if config.scan_layers or config.layer_norm_kind == "triton":
    return layer_norm_lib.LayerNorm(
      config.layer_norm_eps,
      jnp.dtype(config.dtype),
      scale_init,
      zeros_init(("norm",)),
      kind=config.layer_norm_kind,
      name=name,
    )
  return nn.LayerNorm(
    epsilon=config.layer_norm_eps,
    dtype=jnp.dtype(config.dtype),
    param_dtype=jnp.float32,
    scale_init=scale_init,
    bias_init=zeros_init(("norm",)),
    name=name,
  )


_SQRT_HALF = np.float32(1 / np.sqrt(2))


def gelu(x):
  """The exact (erf) GELU of the original BERT, not the tanh approximation, in float32.

  Written ``x * (1 + erf(x / sqrt 2)) / 2``, as BERT and PyTorch write it, rather than through
  `jax.nn.gelu`'s ``erfc``: XLA expands erfc into two polynomial branches and an exp per
  element: GELU's forward ran 4.5x slower on a CPU ([8, 128, 3072]: 2.72 vs 0.61 ms), and its
  fusions on an H200 at under half the copy bandwidth. ``1 + erf`` cancels for large negative
  inputs, so it is computed in float32 whatever the input dtype (in bf16 it would be off by up
  to 18%; in float32 the result is within 1.1e-6 of the exact value).
  """
  x_32 = x.astype(jnp.float32)
  return (0.5 * x_32 * (1.0 + jax.lax.erf(x_32 * _SQRT_HALF))).astype(x.dtype)


def gelu_tanh(x):
  """GELU's tanh approximation ("gelu_new", ALBERT v2)."""
  return jax.nn.gelu(x, approximate=True)


def activation(config: ModelConfig):
  """The config's ``hidden_act``: exact GELU ("gelu") or its tanh form ("gelu_new", ALBERT v2)."""
  if config.hidden_act == "gelu_new":
    return gelu_tanh
  return gelu
