"""Small building blocks shared by the embeddings, encoder blocks and heads."""

import flax.linen as nn
import jax
import jax.numpy as jnp

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


def zeros_init(axes):
  return nn.with_logical_partitioning(nn.initializers.zeros_init(), axes)


def dense(config: ModelConfig, features: int, axes, name: str) -> nn.Dense:
  """A Dense layer with float32 params, compute in the config's dtype and logical axes."""
  return nn.Dense(
    features,
    dtype=jnp.dtype(config.dtype),
    param_dtype=jnp.float32,
    kernel_init=normal_init(config, axes),
    bias_init=zeros_init(axes[-1:]),
    name=name,
  )


def layer_norm(config: ModelConfig, name: str) -> nn.LayerNorm:
  """LayerNorm with float32 params; Flax computes its statistics in float32 for any input."""
  return nn.LayerNorm(
    epsilon=config.layer_norm_eps,
    dtype=jnp.dtype(config.dtype),
    param_dtype=jnp.float32,
    scale_init=nn.with_logical_partitioning(nn.initializers.ones_init(), ("norm",)),
    bias_init=zeros_init(("norm",)),
    name=name,
  )


def gelu(x):
  """The exact (erf) GELU of the original BERT, not the tanh approximation."""
  return jax.nn.gelu(x, approximate=False)


def gelu_tanh(x):
  """GELU's tanh approximation ("gelu_new", ALBERT v2)."""
  return jax.nn.gelu(x, approximate=True)


def activation(config: ModelConfig):
  """The config's ``hidden_act``: exact GELU ("gelu") or its tanh form ("gelu_new", ALBERT v2)."""
  if config.hidden_act == "gelu_new":
    return gelu_tanh
  return gelu
