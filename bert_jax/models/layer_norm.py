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
"""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def normalize(x, scale, bias, epsilon: float, dtype):
  """``(x - mean) / sqrt(var + epsilon) * scale + bias`` over the last axis, in float32.

  Args:
    x: [..., H] input in any float dtype.
    scale: [H] float32 gain.
    bias: [H] float32 offset.
    epsilon: added to the variance.
    dtype: the result's dtype.

  Returns:
    [..., H] in ``dtype``.
  """
  return _normalize_forward(x, scale, bias, epsilon, dtype)[0]


def _row_statistics(x_32, epsilon):
  """Each row's mean and 1 / sqrt(variance + epsilon), [..., 1] float32."""
  mean = jnp.mean(x_32, axis=-1, keepdims=True)
  # Flax's fast variance, clipped at 0 against rounding.
  variance = jnp.maximum(0.0, jnp.mean(jnp.square(x_32), axis=-1, keepdims=True) - mean**2)
  return mean, jax.lax.rsqrt(variance + epsilon)


def _along_rows(vector, ndim):
  """A [H] parameter shaped [1, ..., H] to broadcast over ``ndim``-dimensional rows."""
  return vector.reshape((1,) * (ndim - 1) + vector.shape)


def _normalize_forward(x, scale, bias, epsilon, dtype):
  x_32 = x.astype(jnp.float32)
  mean, inv_std = _row_statistics(x_32, epsilon)
  y = (x_32 - mean) * (inv_std * _along_rows(scale, x.ndim)) + _along_rows(bias, x.ndim)
  return y.astype(dtype), (x, mean, inv_std, scale)


def _normalize_backward(epsilon, dtype, residuals, d_y):
  del epsilon, dtype  # The statistics were kept.
  x, mean, inv_std, scale = residuals
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


class LayerNorm(nn.Module):
  """`flax.linen.LayerNorm` (float32 ``scale`` and ``bias``) computed by `normalize`.

  Attributes:
    epsilon: added to the variance.
    dtype: the output's dtype.
    scale_init: initialiser of ``scale`` (with its logical axes).
    bias_init: initialiser of ``bias`` (with its logical axes).
  """

  epsilon: float
  dtype: jnp.dtype
  scale_init: nn.initializers.Initializer
  bias_init: nn.initializers.Initializer

  @nn.compact
  def __call__(self, x):
    width = x.shape[-1]
    scale = self.param("scale", self.scale_init, (width,), jnp.float32)
    bias = self.param("bias", self.bias_init, (width,), jnp.float32)
    return normalize(x, scale, bias, self.epsilon, jnp.dtype(self.dtype))
