"""Layer normalisation with a hand-written backward pass that keeps only its input.

Under ``model.scan_layers`` JAX, not XLA, decides what the forward pass of a layer keeps for
the backward one: every residual of the scanned body's derivative is written into a stacked
[layers, ...] array. Autodiff of `flax.linen.LayerNorm` keeps three float32 arrays of the
input's size per norm: 9.0 GiB of BERT-large's 23.7 GiB of temporaries on an H100 at batch
128 × 128 (`tools/aot_compile --topology=h100-1`; 15.45 GiB with this norm and `dropout`'s
backward). This backward keeps the input in its own dtype plus each row's mean and reciprocal
standard deviation, and recomputes the rest.

Unrolled, XLA already recomputes those intermediates inside the fusions that read them, so
`layers.layer_norm` keeps Flax's norm there: its compiled steps are the ones measured on GPUs.
Both compute the same function: statistics in float32 (variance as E[x²] − E[x]², as Flax),
the result cast to the compute dtype; parameter names, shapes, initialisers and logical axes
are Flax's.

With ``kernels`` (``model.layer_norm_kind='triton'``) both passes are `layer_norm_kernels`'
Triton kernels instead, one pass over memory each way, keeping the same residuals; their
variance is the mean squared deviation from the row's mean, which is more exact than
E[x²] − E[x]² where a row's mean dwarfs its spread.
"""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.errors import UserInputError
from bert_jax.models import layer_norm_kernels, per_shard
from bert_jax.models import platform as platform_lib


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def normalize(x, scale, bias, epsilon: float, dtype, kernels):
  """``(x - mean) / sqrt(var + epsilon) * scale + bias`` over the last axis, in float32.

  Args:
    x: [..., H] input in any float dtype.
    scale: [H] float32 gain.
    bias: [H] float32 offset.
    epsilon: added to the variance.
    dtype: the result's dtype.
    kernels: `layer_norm_kernels.Options` to compute both passes with the Triton kernels, or
      None for XLA's.

  Returns:
    [..., H] in ``dtype``.
  """
  return _normalize_forward(x, scale, bias, epsilon, dtype, kernels)[0]


def _row_statistics(x_32, epsilon):
  """Each row's mean and 1 / sqrt(variance + epsilon), [..., 1] float32."""
  mean = jnp.mean(x_32, axis=-1, keepdims=True)
  # Flax's fast variance, clipped at 0 against rounding.
  variance = jnp.maximum(0.0, jnp.mean(jnp.square(x_32), axis=-1, keepdims=True) - mean**2)
  return mean, jax.lax.rsqrt(variance + epsilon)


def _along_rows(vector, ndim):
  """A [H] parameter shaped [1, ..., H] to broadcast over ``ndim``-dimensional rows."""
  return vector.reshape((1,) * (ndim - 1) + vector.shape)


def _statistics_shape(x):
  return x.shape[:-1] + (1,)


def _normalize_forward(x, scale, bias, epsilon, dtype, kernels):
  if kernels is not None:
    y, mean, inv_std = layer_norm_kernels.forward(
      x.reshape(-1, x.shape[-1]), scale, bias, epsilon, dtype, kernels
    )
    statistics = _statistics_shape(x)
    residuals = (x, mean.reshape(statistics), inv_std.reshape(statistics), scale)
    return y.reshape(x.shape), residuals
  x_32 = x.astype(jnp.float32)
  mean, inv_std = _row_statistics(x_32, epsilon)
  y = (x_32 - mean) * (inv_std * _along_rows(scale, x.ndim)) + _along_rows(bias, x.ndim)
  return y.astype(dtype), (x, mean, inv_std, scale)


def _normalize_backward(epsilon, dtype, kernels, residuals, d_y):
  del epsilon, dtype  # The statistics were kept.
  x, mean, inv_std, scale = residuals
  if kernels is not None:
    width = x.shape[-1]
    d_x, d_scale, d_bias = layer_norm_kernels.backward(
      x.reshape(-1, width),
      mean.reshape(-1),
      inv_std.reshape(-1),
      scale,
      d_y.reshape(-1, width),
      kernels,
    )
    return d_x.reshape(x.shape), d_scale, d_bias
  normalized = (x.astype(jnp.float32) - mean) * inv_std
  d_y_32 = d_y.astype(jnp.float32)
  d_normalized = d_y_32 * _along_rows(scale, x.ndim)
  # The derivative of normalising a row: remove d_normalized's mean and its projection on the
  # normalised row, then scale by 1 / std.
  d_x = inv_std * (
    d_normalized
    - jnp.mean(d_normalized, axis=-1, keepdims=True)
    - normalized * jnp.mean(d_normalized * normalized, axis=-1, keepdims=True)
  )
  rows = tuple(range(x.ndim - 1))
  d_scale = jnp.sum(d_y_32 * normalized, axis=rows)
  d_bias = jnp.sum(d_y_32, axis=rows)
  return d_x.astype(x.dtype), d_scale, d_bias


normalize.defvjp(_normalize_forward, _normalize_backward)


def kernel_options(layer_norm_kind: str):
  """The Triton kernels' options for ``layer_norm_kind`` on the platform being compiled for.

  Returns:
    None (XLA's norm) unless the kind is ``'triton'``; then compiled kernels on a GPU and
    Pallas interpret mode on a CPU (slow; for tests and CPU debugging).

  Raises:
    UserInputError: for ``'triton'`` on a TPU.
  """
  if layer_norm_kind != "triton":
    return None
  platform = platform_lib.current_platform()
  if platform == "tpu":
    raise UserInputError(
      "model.layer_norm_kind='triton' runs on NVIDIA GPUs; on TPUs use "
      "model.layer_norm_kind='auto' (XLA fuses the norm there)"
    )
  return layer_norm_kernels.Options(interpret=platform != "gpu")


class LayerNorm(nn.Module):
  """`flax.linen.LayerNorm` (float32 ``scale`` and ``bias``) computed by `normalize`.

  Attributes:
    epsilon: added to the variance.
    dtype: the output's dtype.
    scale_init: initialiser of ``scale`` (with its logical axes).
    bias_init: initialiser of ``bias`` (with its logical axes).
    kind: ``model.layer_norm_kind``: ``'triton'`` for the Triton kernels, else XLA's norm.
  """

  epsilon: float
  dtype: jnp.dtype
  scale_init: nn.initializers.Initializer
  bias_init: nn.initializers.Initializer
  kind: str = "xla"

  @nn.compact
  def __call__(self, x):
    width = x.shape[-1]
    scale = self.param("scale", self.scale_init, (width,), jnp.float32)
    bias = self.param("bias", self.bias_init, (width,), jnp.float32)
    kernels = kernel_options(self.kind)
    dtype = jnp.dtype(self.dtype)
    if kernels is None:
      return normalize(x, scale, bias, self.epsilon, dtype, None)
    # Rows are independent: the kernels run on each device's rows, the leading axis split as a
    # batch is (under a mesh); the parameters' gradients are summed over the shards.
    rows_layout = "B" + "R" * (x.ndim - 2) + "D"
    return per_shard.call_per_shard(
      lambda x, scale, bias: normalize(x, scale, bias, self.epsilon, dtype, kernels),
      (x, scale, bias),
      (rows_layout, "D", "D"),
      rows_layout,
    )
