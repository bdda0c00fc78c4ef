"""init_from across layer layouts: an unscanned checkpoint initialises a ``scan_layers`` model and
back, with the same parameters (layer i = slice i of the stack) and the same outputs."""

import re

import jax
import numpy as np

from bert_jax.parallel import mesh as mesh_lib
from bert_jax.parallel import sharding
from bert_jax.train import layer_layout, run_state, setup
from bert_jax.train.checkpointing import Checkpointer
from bert_jax.train.settings import settings_from_config
from tests import helpers, run_helpers


def _initialise(workdir, scan_layers, init_from=""):
  """The state a run of a 3-layer model starts from (init_from overlaid on a fresh init),
  saved as ``workdir``'s step-1 checkpoint, and its eval metric sums on a fixed random batch.
  Only the init and the eval step compile."""
  config = helpers.small_config(
    init_from=str(init_from), **{"model.num_layers": 3, "model.scan_layers": scan_layers}
  )
  settings = settings_from_config(config)
  mesh = mesh_lib.make_mesh(settings.mesh, helpers.one_device())
  with setup.mesh_context(mesh, settings.mesh.logical_axis_rules):
    training = setup.build_training(settings, mesh)
    checkpointer = Checkpointer(str(workdir))
    # A fresh init from another seed: restored values are not the init's by coincidence.
    state, rng, _ = run_state.restore_or_initialize(
      checkpointer,
      training.init_params,
      training.optimizer,
      training.abstract_state,
      training.state_shardings,
      1 if init_from else 0,
      sharding.replicated(mesh),
      settings.trainer.init_from,
      settings.model,
    )
    batch = sharding.host_batch_to_global(training.task.random_batch(8), mesh)
    sums = jax.device_get(training.eval_step(state.params, batch, rng))
    checkpointer.save(1, state, rng, 0)
    checkpointer.close()
  return run_helpers.restore_params(workdir, 1), sums


def test_unscanned_to_scanned_and_back(tmp_path):
  unscanned, unscanned_sums = _initialise(tmp_path / "unscanned", False)
  scanned, scanned_sums = _initialise(tmp_path / "scanned", True, tmp_path / "unscanned")
  back, back_sums = _initialise(tmp_path / "back", False, tmp_path / "scanned")

  stacked = [k for k in scanned if "/encoder/layers/block/" in k]
  assert stacked and not any(re.search(r"/layer_\d+/", k) for k in scanned)
  for name in stacked:
    for i in range(3):
      np.testing.assert_array_equal(
        scanned[name][i], unscanned[name.replace("layers/block", f"layer_{i}")], err_msg=name
      )
  assert back.keys() == unscanned.keys()
  for name, value in unscanned.items():
    np.testing.assert_array_equal(back[name], value, err_msg=name)
  # The same model in either layout: the same outputs (loss and accuracy sums).
  assert unscanned_sums.keys() == scanned_sums.keys() and len(unscanned_sums) > 2
  for sums in (scanned_sums, back_sums):
    for key, value in unscanned_sums.items():
      np.testing.assert_allclose(sums[key], value, rtol=2e-5, err_msg=key)


def test_layout_conversion_of_shapes_and_arrays_round_trips():
  unscanned = {
    "bert/encoder/layer_0/ffn/kernel": (4, 8),
    "bert/encoder/layer_1/ffn/kernel": (4, 8),
    "bert/embeddings/word/embedding": (10, 4),
  }
  scanned = {
    "bert/encoder/layers/block/ffn/kernel": (2, 4, 8),
    "bert/embeddings/word/embedding": (10, 4),
  }
  assert layer_layout.layout(unscanned) == layer_layout.UNSCANNED
  assert layer_layout.convert_shapes(unscanned, layer_layout.SCANNED) == scanned
  assert layer_layout.convert_shapes(scanned, layer_layout.UNSCANNED) == unscanned
  arrays = {k: np.random.default_rng(0).normal(size=s) for k, s in unscanned.items()}
  round_trip = layer_layout.convert_arrays(
    layer_layout.convert_arrays(arrays, layer_layout.SCANNED), layer_layout.UNSCANNED
  )
  assert round_trip.keys() == arrays.keys()
  for name, value in arrays.items():
    np.testing.assert_array_equal(round_trip[name], value)
