"""BERT's feed-forward (dense -> GELU -> dense), optionally over chunks of the sequence.

Its weights are held as plain arrays (`DenseParams`) so the chunked form can run them inside
`jax.lax.map`; the parameter tree is that of two `nn.Dense` layers named as in BERT.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import layers
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

  def mlp(x_BQD):
    h_BQF = x_BQD.astype(dtype) @ kernel_in_DF.astype(dtype) + bias_in_F.astype(dtype)[None, None]
    h_BQF = nn.with_logical_constraint(
      activation(h_BQF), (names.ACTIVATION_BATCH, names.ACTIVATION_LENGTH, names.ACTIVATION_MLP)
    )
    return h_BQF @ kernel_out_FD.astype(dtype) + bias_out_D.astype(dtype)[None, None]

  batch, length, width = x_BLD.shape
  if chunk_len <= 0 or chunk_len >= length:
    return mlp(x_BLD)
  n_chunks = -(-length // chunk_len)
  padded_BLD = jnp.pad(x_BLD, ((0, 0), (0, n_chunks * chunk_len - length), (0, 0)))
  x_CBQD = jnp.swapaxes(padded_BLD.reshape(batch, n_chunks, chunk_len, width), 0, 1)
  out_CBQD = jax.lax.map(jax.checkpoint(mlp), x_CBQD)
  out_BLD = jnp.swapaxes(out_CBQD, 0, 1).reshape(batch, n_chunks * chunk_len, width)
  return out_BLD[:, :length]
