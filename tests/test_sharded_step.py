"""One train step gives the same loss and params on 1 device and on 8-device meshes."""

import jax
import numpy as np
import pytest

from tests import helpers


@pytest.fixture(scope="module")
def single_device_result():
  return helpers.one_train_step(helpers.small_config(**{"mesh.data": 1}), jax.devices()[:1])


@pytest.mark.parametrize(
  "axes",
  [
    {"mesh.data": 8},
    {"mesh.data": 1, "mesh.fsdp": 8},
    {"mesh.data": 2, "mesh.tensor": 4},
  ],
  ids=["data8", "fsdp8", "data2xtensor4"],
)
def test_sharded_step_equals_single_device(single_device_result, axes):
  init_1, params_1, metrics_1, _ = single_device_result
  init_8, params_8, metrics_8, specs = helpers.one_train_step(
    helpers.small_config(**axes), jax.devices()
  )
  if axes.get("mesh.fsdp", 1) > 1 or axes.get("mesh.tensor", 1) > 1:
    assert any(any(axis is not None for axis in spec) for spec in specs), "nothing was sharded"
  jax.tree.map(np.testing.assert_array_equal, init_1, init_8)  # Same init whatever the mesh.
  for key in ("mlm_loss", "nsp_loss", "mlm_accuracy", "grad_norm"):
    np.testing.assert_allclose(metrics_8[key], metrics_1[key], rtol=2e-5, err_msg=key)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-4), params_8, params_1
  )


def test_gradient_accumulation_equals_one_big_batch(single_device_result):
  _, params_1, metrics_1, _ = single_device_result
  config = helpers.small_config(
    **{
      "mesh.data": 1,
      "gradient_accumulation_steps": 2,
      "model.hidden_dropout_rate": 0.0,
      "model.attention_dropout_rate": 0.0,
    }
  )
  no_dropout = helpers.small_config(
    **{"mesh.data": 1, "model.hidden_dropout_rate": 0.0, "model.attention_dropout_rate": 0.0}
  )
  _, accumulated, metrics_a, _ = helpers.one_train_step(config, jax.devices()[:1])
  _, single, metrics_s, _ = helpers.one_train_step(no_dropout, jax.devices()[:1])
  np.testing.assert_allclose(metrics_a["mlm_loss"], metrics_s["mlm_loss"], rtol=1e-5)
  np.testing.assert_allclose(metrics_a["grad_norm"], metrics_s["grad_norm"], rtol=1e-5)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-4), accumulated, single
  )
