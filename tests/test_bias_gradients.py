"""Bias gradients are summed in float32: `layers.add_bias`, `layers.Dense`, and a whole bf16
BERT step with no bf16 reduction left in it."""

import importlib.util
import re

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models import layers
from bert_jax.parallel import mesh as mesh_lib
from bert_jax.train import setup
from bert_jax.train.settings import settings_from_config
from tests import run_helpers


@pytest.mark.parametrize("bias_shape", [(6,), (3, 6), (2, 3, 6)])
def test_add_bias_equals_autodiff_of_the_sum_in_float32(bias_shape):
  y = jax.random.normal(jax.random.key(0), (4, 5, *bias_shape))
  bias = jax.random.normal(jax.random.key(1), bias_shape)
  weights = jax.random.normal(jax.random.key(2), y.shape)

  def loss(add):
    return lambda y, b: (add(y, b) * weights).sum()

  def plain(y, b):
    return y + b[None, None]

  got = jax.grad(loss(layers.add_bias), argnums=(0, 1))(y, bias)
  want = jax.grad(loss(plain), argnums=(0, 1))(y, bias)
  np.testing.assert_array_equal(layers.add_bias(y, bias), plain(y, bias))
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_bf16_bias_gradient_is_the_float32_sum():
  """4,096 rows of 1 + 2^-7: a bf16 running sum would stall at 512; the gradient is the exact
  float32 total, in the bias's own dtype."""
  y = jnp.zeros((64, 64, 8), jnp.bfloat16)
  bias = jnp.zeros((8,), jnp.float32)
  d_y = jnp.full(y.shape, 1 + 2**-7, jnp.bfloat16)
  _, vjp = jax.vjp(layers.add_bias, y, bias)
  d_y_back, d_bias = vjp(d_y)
  assert d_bias.dtype == jnp.float32 and d_y_back.dtype == jnp.bfloat16
  np.testing.assert_array_equal(d_bias, np.full(8, 4096 * (1 + 2**-7), np.float32))


def test_dense_has_nn_dense_parameters_and_values():
  config_dtype = jnp.float32
  ours = layers.Dense(
    4,
    dtype=config_dtype,
    kernel_init=nn.initializers.normal(1.0),
    bias_init=nn.initializers.normal(1.0),
  )
  theirs = nn.Dense(4, dtype=config_dtype, param_dtype=jnp.float32)
  x = jax.random.normal(jax.random.key(3), (2, 5, 3))
  params = ours.init(jax.random.key(0), x)
  assert jax.tree.map(jnp.shape, params) == jax.tree.map(
    jnp.shape, theirs.init(jax.random.key(0), x)
  )
  np.testing.assert_allclose(ours.apply(params, x), theirs.apply(params, x), rtol=1e-6, atol=1e-6)


def test_bf16_bert_step_sums_no_gradient_in_bf16():
  """The traced program of a bf16 BERT train step has no reduction with a bf16 result: every
  bias and LayerNorm gradient is summed in float32 (a GPU compile keeps a bf16 reduce's bf16
  adder; before `add_bias` BERT-tiny's step had 21 of them)."""
  spec = importlib.util.spec_from_file_location(
    "bert_tiny", run_helpers.REPO / "configs/bert_tiny.py"
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config()
  config.model.dtype = "bfloat16"
  config.global_batch_size = 8
  settings = settings_from_config(config)
  mesh = mesh_lib.make_mesh(settings.mesh)
  with setup.mesh_context(mesh, settings.mesh.logical_axis_rules):
    training = setup.build_training(settings, mesh)
    inputs = setup.random_step_inputs(training, mesh, 8)
    text = training.train_step.lower(inputs.state, inputs.batch, inputs.rng).as_text(dialect="hlo")
  reduces = [line for line in text.splitlines() if " reduce(" in line]
  assert len(reduces) > 50  # The step's reductions are there to be checked.
  assert [line for line in reduces if re.search(r"= \(?bf16\[", line)] == []
