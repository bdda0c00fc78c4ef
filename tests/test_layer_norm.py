"""The hand-differentiated layer norm computes Flax's LayerNorm: outputs, gradients, parameters."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models import layers
from bert_jax.models.config import ModelConfig
from bert_jax.models.layer_norm import normalize

EPSILON = 1e-12


def _flax_layer_norm(x, scale, bias, dtype):
  module = nn.LayerNorm(epsilon=EPSILON, dtype=dtype, param_dtype=jnp.float32)
  return module.apply({"params": {"scale": scale, "bias": bias}}, x)


def _inputs(dtype):
  keys = jax.random.split(jax.random.key(0), 4)
  # Rows with an offset and a spread of their own, as a residual stream has.
  x = 3.0 + 2.0 * jax.random.normal(keys[0], (3, 5, 48)) * jax.random.uniform(keys[1], (3, 5, 1))
  scale = 1.0 + 0.3 * jax.random.normal(keys[2], (48,))
  bias = 0.1 * jax.random.normal(keys[3], (48,))
  return x.astype(dtype), scale, bias


def _loss_and_grads(norm, x, scale, bias, dtype):
  weights = jnp.cos(jnp.arange(x.size, dtype=jnp.float32)).reshape(x.shape)

  def loss(x, scale, bias):
    return jnp.sum(norm(x, scale, bias, dtype).astype(jnp.float32) * weights)

  return jax.value_and_grad(loss, argnums=(0, 1, 2))(x, scale, bias)


@pytest.mark.parametrize(
  "dtype, tolerance", [(jnp.float32, 1e-5), (jnp.bfloat16, 2e-2)], ids=["float32", "bfloat16"]
)
def test_outputs_and_gradients_are_flax_layer_norms(dtype, tolerance):
  x, scale, bias = _inputs(dtype)
  np.testing.assert_allclose(
    np.asarray(normalize(x, scale, bias, EPSILON, dtype, None), np.float32),
    np.asarray(_flax_layer_norm(x, scale, bias, dtype), np.float32),
    rtol=tolerance,
    atol=tolerance,
  )
  ours = _loss_and_grads(lambda *a: normalize(*a[:3], EPSILON, a[3], None), x, scale, bias, dtype)
  flax = _loss_and_grads(_flax_layer_norm, x, scale, bias, dtype)
  for got, want in zip(jax.tree.leaves(ours), jax.tree.leaves(flax)):
    assert got.dtype == want.dtype
    np.testing.assert_allclose(
      np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=tolerance, atol=tolerance
    )


def test_scanned_models_get_the_same_parameters_as_unrolled_ones():
  """Names, shapes, initial values and logical axes: checkpoints of either layout fit both."""
  x = jnp.ones((2, 4, 8), jnp.bfloat16)

  def boxed_params(scan_layers):
    config = ModelConfig(hidden_size=8, num_heads=2, dtype="bfloat16", scan_layers=scan_layers)
    module = layers.layer_norm(config, "norm")
    return module, module.init(jax.random.key(0), x)["params"]

  flax_module, flax_params = boxed_params(scan_layers=False)
  ours_module, ours_params = boxed_params(scan_layers=True)
  assert isinstance(flax_module, nn.LayerNorm) and not isinstance(ours_module, nn.LayerNorm)
  assert jax.tree.structure(ours_params) == jax.tree.structure(flax_params)
  for ours, flax in zip(jax.tree.leaves(ours_params), jax.tree.leaves(flax_params)):
    np.testing.assert_array_equal(ours, flax)
  assert nn.get_partition_spec(ours_params) == nn.get_partition_spec(flax_params)
  y_ours = ours_module.apply({"params": ours_params}, x)
  y_flax = flax_module.apply({"params": flax_params}, x)
  assert y_ours.dtype == y_flax.dtype == jnp.bfloat16
