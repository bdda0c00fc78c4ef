"""BERT's feed-forward (dense -> GELU -> dense), optionally over chunks of the sequence.

Its weights are held as plain arrays (`DenseParams`) so the chunked form can run them inside
`jax.lax.map`; the parameter tree is that of two `nn.Dense` layers named as in BERT. The
first bias, the activation and the output dense are differentiated by hand
(`activation_then_dense`): on TPU and CPU the backward keeps one [B, L, intermediate] array per
layer instead of two, on GPU it keeps the activation's output rather than recompute it, and
everywhere the first bias's gradient is summed in the pass that computes the activation's.
"""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import layers
from bert_jax.models import platform as platform_lib
from bert_jax.models.config import ModelConfig


class DenseParams(nn.Module):
  """The kernel and bias of an `nn.Dense` (same names, shapes and init), returned as arrays.

  The feed-forward uses its weights inside `jax.lax.map` over chunks, where calling a Flax
  submodule is not allowed; holding them here keeps the parameter tree of an `nn.Dense`.
  """

  config: ModelConfig
  in_features: int
  features: int
  axes: tuple

  @nn.compact
  def __call__(self):
    kernel = self.param(
      "kernel",
      layers.normal_init(self.config, self.axes),
      (self.in_features, self.features),
      jnp.float32,
    )
    bias = self.param("bias", layers.zeros_init(self.axes[-1:]), (self.features,), jnp.float32)
    return kernel, bias


def feed_forward_params(config: ModelConfig, scopes=("intermediate", "output")):
  """The two dense layers of a feed-forward, named ``intermediate`` and ``output`` as in BERT.

  Pass ``scopes=(None, None)`` from a ``setup`` that assigns them to attributes of those names.
  """
  return (
    DenseParams(
      config, config.hidden_size, config.intermediate_size, (names.EMBED, names.MLP), name=scopes[0]
    ),
    DenseParams(
      config, config.intermediate_size, config.hidden_size, (names.MLP, names.EMBED), name=scopes[1]
    ),
  )


def chunked_feed_forward(x_BLD, weights, *, dtype, chunk_len: int, activation=layers.gelu):
  """GELU MLP of BERT, optionally over chunks of ``chunk_len`` positions.

  Chunks run one after another under `jax.lax.map` and each is rematerialised, so neither the
  forward nor the backward pass holds [B, L, intermediate] at once: one chunk's [B, Q, F] at a
  time. The length is zero-padded up to a multiple of ``chunk_len`` (positions are independent,
  so padding changes nothing) and the padding sliced off.

  Args:
    x_BLD: inputs.
    weights: ((kernel_in [D, F], bias_in [F]), (kernel_out [F, D], bias_out [D])).
    dtype: compute dtype of the matmuls.
    chunk_len: positions per chunk; 0 (or >= L) runs the whole sequence at once.
    activation: the nonlinearity between the two layers (`layers.activation`).

  Returns:
    [B, L, D] in ``dtype``.
  """
  (kernel_in_DF, bias_in_F), (kernel_out_FD, bias_out_D) = weights
  keep_output = platform_lib.current_platform() == "gpu"

  def mlp(x_BQD):
    y_BQF = nn.with_logical_constraint(
      x_BQD.astype(dtype) @ kernel_in_DF.astype(dtype),
      (names.ACTIVATION_BATCH, names.ACTIVATION_LENGTH, names.ACTIVATION_MLP),
    )
    return activation_then_dense(
      activation,
      keep_output,
      y_BQF,
      bias_in_F,
      kernel_out_FD.astype(dtype),
      bias_out_D.astype(dtype),
    )

  batch, length, width = x_BLD.shape
  if chunk_len <= 0 or chunk_len >= length:
    return mlp(x_BLD)
  n_chunks = -(-length // chunk_len)
  padded_BLD = jnp.pad(x_BLD, ((0, 0), (0, n_chunks * chunk_len - length), (0, 0)))
  x_CBQD = jnp.swapaxes(padded_BLD.reshape(batch, n_chunks, chunk_len, width), 0, 1)
  out_CBQD = jax.lax.map(jax.checkpoint(mlp), x_CBQD)
  out_BLD = jnp.swapaxes(out_CBQD, 0, 1).reshape(batch, n_chunks * chunk_len, width)
  return out_BLD[:, :length]


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def activation_then_dense(activation, keep_output, y_BQF, bias_F, kernel_FD, bias_D):
  """``activation(y + bias_F) @ kernel + bias`` with a backward that keeps one or two [B, Q, F]
  arrays and sums the first bias's gradient where it computes ``y``'s.

  Autodiff keeps two [B, Q, F] arrays per layer for the backward pass (for the exact GELU: the
  pre-activation and its erf term; the product's input otherwise), and computes the
  activation's gradient in float32 where the compute dtype is bf16. This backward:

  - without ``keep_output`` (TPU, CPU) keeps only ``h = y + bias_F`` and recomputes the
    activation inside each product that needs it: XLA fuses elementwise work into a TPU
    matmul's operands, so recomputing is free there and the [B, Q, F] traffic is not.
  - with ``keep_output`` (GPU) also keeps ``activation(h)``, which the forward wrote anyway as
    the product's input (cuBLAS fuses nothing into its operands), instead of a pass that
    recomputes it; and writes the input gradient once in the compute dtype, which both
    products read. On an H200 (bf16 BERT-base) the recompute was 1.9 ms of a 62 ms step, and
    the float32 gradient XLA wrote in its place cost as much again.

  ``bias_F``'s gradient is summed from the activation's derivative in the same expression, so
  XLA computes both in one fusion over [B, Q, F] (per-column partial sums beside the gradient)
  instead of reading the gradient back: 201 MB a layer of BERT-base at 256 x 128 in bf16,
  2.4 GB of an H100 step's 7.69e10 bytes (`tools/aot_compile --topology=h100-1`).

  Args:
    activation: the elementwise nonlinearity (`layers.activation`).
    keep_output: keep the activation's output for the backward (GPU) instead of recomputing.
    y_BQF: the first product ``x @ kernel_in`` [..., F] in the compute dtype, before its bias.
    bias_F: [F] the first product's bias (float32 parameter; added in the compute dtype).
    kernel_FD: [F, D] kernel in the compute dtype.
    bias_D: [D] bias in the compute dtype.

  Returns:
    [..., D] in the compute dtype.
  """
  del keep_output  # How the backward works, not what the layer computes.
  return _dense(activation(layers.add_bias(y_BQF, bias_F)), kernel_FD, bias_D)


def _dense(g_BQF, kernel_FD, bias_D):
  return g_BQF @ kernel_FD + bias_D.reshape((1,) * (g_BQF.ndim - 1) + (-1,))


def _activation_then_dense_forward(activation, keep_output, y_BQF, bias_F, kernel_FD, bias_D):
  h_BQF = layers.add_bias(y_BQF, bias_F)
  g_BQF = activation(h_BQF)
  residuals = (h_BQF, g_BQF if keep_output else None, kernel_FD, jnp.zeros((0,), bias_F.dtype))
  return _dense(g_BQF, kernel_FD, bias_D), residuals


def _activation_then_dense_backward(activation, keep_output, residuals, d_out_BQD):
  h_BQF, g_BQF, kernel_FD, bias_like = residuals
  d_bias_D = jnp.sum(d_out_BQD, axis=tuple(range(d_out_BQD.ndim - 1)))
  if keep_output:
    d_kernel_FD = jnp.einsum("...f,...d->fd", g_BQF, d_out_BQD)
    h_for_input_BQF = h_BQF
  else:
    # Each product recomputes what it needs from its own copy of ``h`` behind a barrier, so
    # XLA merges neither recomputation with the forward's nor with each other (a merged erf
    # term would be written out and read back by both), and fuses each into its product.
    h_for_kernel_BQF, d_out_for_kernel_BQD = jax.lax.optimization_barrier((h_BQF, d_out_BQD))
    d_kernel_FD = jnp.einsum("...f,...d->fd", activation(h_for_kernel_BQF), d_out_for_kernel_BQD)
    h_for_input_BQF, kernel_FD = jax.lax.optimization_barrier((h_BQF, kernel_FD))
  _, activation_vjp = jax.vjp(activation, h_for_input_BQF)
  (d_h_BQF,) = activation_vjp(d_out_BQD @ kernel_FD.T)
  d_bias_F = jnp.sum(d_h_BQF.astype(jnp.float32), axis=tuple(range(d_h_BQF.ndim - 1)))
  if keep_output:
    # The barrier hands both products the compute-dtype gradient as it is: without it XLA
    # (allowed excess precision) may give them the unrounded float32 values and write [B, Q, F]
    # in float32.
    d_h_BQF = jax.lax.optimization_barrier(d_h_BQF)
  return (
    d_h_BQF,
    d_bias_F.astype(bias_like.dtype),
    d_kernel_FD.astype(kernel_FD.dtype),
    d_bias_D.astype(d_out_BQD.dtype),
  )


activation_then_dense.defvjp(_activation_then_dense_forward, _activation_then_dense_backward)
