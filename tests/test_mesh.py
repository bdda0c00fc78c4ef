"""Meshes within (ici) and across (dcn) slices on the 8 fake CPU devices: layout, train-step
numbers, one-line errors listing the valid sizes, and runs on a subset of the devices."""

import jax
import numpy as np
import pytest

from bert_jax.errors import UserInputError
from bert_jax.parallel import mesh as mesh_lib
from bert_jax.train import flops
from bert_jax.train.loop import train_and_evaluate
from tests import helpers, run_helpers


def _device_ids(mesh):
  return np.vectorize(lambda d: d.id)(mesh.devices)


def test_slices_vary_slowest_along_each_axis():
  # CPU devices have no slices: dcn_tensor=2 makes devices 0-3 and 4-7 the two stand-in slices,
  # each laid out data=2 x tensor=2, and the tensor axis runs over slice 0, then slice 1.
  mesh = mesh_lib.make_mesh(mesh_lib.MeshConfig(data=2, tensor=2, dcn_data=1, dcn_tensor=2))
  assert dict(mesh.shape) == {"data": 2, "fsdp": 1, "tensor": 4}
  np.testing.assert_array_equal(_device_ids(mesh), [[[0, 1, 4, 5]], [[2, 3, 6, 7]]])
  assert all(t == jax.sharding.AxisType.Auto for t in mesh.axis_types)


def test_dcn_minus_one_is_one_slice_on_cpu():
  config = mesh_lib.MeshConfig(data=-1, fsdp=2)
  assert mesh_lib.axis_sizes(config, jax.devices()) == ((4, 2, 1), (1, 1, 1))


def test_dcn_data_times_ici_data_is_data8():
  # The same devices in the same order along "data", so the very same train step program.
  stacked = mesh_lib.make_mesh(mesh_lib.MeshConfig(data=4, dcn_data=2))
  flat = mesh_lib.make_mesh(mesh_lib.MeshConfig(data=8))
  np.testing.assert_array_equal(_device_ids(stacked), _device_ids(flat))


@pytest.fixture(scope="module")
def data8_result():
  return helpers.one_train_step(helpers.small_config(**{"mesh.data": 8}), jax.devices())


def test_fsdp_and_tensor_across_slices_give_the_data8_numbers(data8_result):
  config = helpers.small_config(
    **{"mesh.data": 2, "mesh.fsdp": 1, "mesh.tensor": 2, "mesh.dcn_data": 1, "mesh.dcn_fsdp": 2}
  )
  _, params, metrics, specs = helpers.one_train_step(config, jax.devices())
  assert any("fsdp" in spec for spec in specs) and any("tensor" in spec for spec in specs)
  _, params_8, metrics_8, _ = data8_result
  for key in ("mlm_loss", "nsp_loss", "grad_norm"):
    np.testing.assert_allclose(metrics[key], metrics_8[key], rtol=2e-5, err_msg=key)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-4), params, params_8
  )


@pytest.mark.parametrize(
  "config,message",
  [
    (
      {"data": 3},
      (
        "mesh data=3 fsdp=1 tensor=1 does not divide the 8 devices; valid axis sizes: 1, 2, 4, 8, "
        "with product 8"
      ),
    ),
    (
      {"data": 2, "fsdp": 2},
      (
        "mesh data=2 fsdp=2 tensor=1 uses 4 of the 8 devices; make the product 8 from the valid "
        "axis sizes 1, 2, 4, 8"
      ),
    ),
    (
      {"dcn_data": 3},
      (
        "mesh dcn_data=3 dcn_fsdp=1 dcn_tensor=1 asks for 3 slices, which does not divide the 8 "
        "devices; valid slice counts: 1, 2, 4, 8"
      ),
    ),
    (
      {"data": -1, "dcn_data": 2, "tensor": 3},
      (
        "mesh data=-1 fsdp=1 tensor=3 does not divide the 4 devices of each slice; valid axis "
        "sizes: 1, 2, 4"
      ),
    ),
  ],
  ids=["ici", "product", "dcn", "ici_of_slice"],
)
def test_mesh_not_dividing_the_devices_lists_the_valid_sizes(config, message):
  with pytest.raises(UserInputError) as error:
    mesh_lib.make_mesh(mesh_lib.MeshConfig(**config))
  assert str(error.value).startswith(message)


@pytest.mark.parametrize(
  "config,message",
  [
    ({"data": -1, "fsdp": -1}, "more than one -1"),
    ({"dcn_fsdp": 0}, "mesh.dcn_fsdp=0: mesh axis sizes must be >= 1, or -1"),
  ],
)
def test_bad_mesh_sizes_are_refused_at_the_config_boundary(config, message):
  with pytest.raises(UserInputError, match=message):
    mesh_lib.MeshConfig(**config)


def test_a_run_trains_on_the_devices_it_is_given(tmp_path, small_corpus_keys):
  """A 2-way data mesh is refused on all 8 devices and trains on 2 of them; MFU's peak counts
  the run's devices only."""
  config = helpers.small_config(
    num_train_steps=2,
    checkpoint_every_steps=2,
    **{"mesh.data": 2, "data.num_eval_examples": 8, **small_corpus_keys},
  )
  with pytest.raises(UserInputError, match="mesh"):
    train_and_evaluate(config, str(tmp_path / "all"))
  metrics = train_and_evaluate(config, str(tmp_path / "two"), jax.devices()[:2])
  assert np.isfinite(metrics["loss"])
  assert run_helpers.checkpoint_steps(tmp_path / "two") == [2]
  assert flops.total_peak_flops(1e12, jax.devices()[:2]) == 2e12
  assert flops.total_peak_flops(1e12) == 8e12
