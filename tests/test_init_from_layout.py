"""init_from across layer layouts: an unscanned checkpoint initialises a ``scan_layers`` model and
back, with the same parameters (layer i = slice i of the stack) and the same outputs."""

import re

import numpy as np

from bert_jax.train import layer_layout
from bert_jax.train.loop import train_and_evaluate
from tests import helpers, run_helpers


def _config(**overrides):
  values = {
    "num_train_steps": 2,
    "checkpoint_every_steps": 2,
    "eval_every_steps": 100,
    "data.num_eval_examples": 16,
    "model.num_layers": 3,
  }
  values.update(overrides)
  return helpers.small_config(**values)


def _restored_as_is(source, scan_layers, workdir):
  """A 1-step run from ``source`` whose update has learning rate 0 (warmup): its params after
  the step are the restored ones, its eval the restored model's."""
  return train_and_evaluate(
    _config(
      num_train_steps=1,
      checkpoint_every_steps=1,
      init_from=str(source),
      **{"optimizer.warmup_steps": 5, "model.scan_layers": scan_layers},
    ),
    str(workdir),
  )


def test_unscanned_to_scanned_and_back(tmp_path):
  unscanned_metrics = train_and_evaluate(_config(), str(tmp_path / "unscanned"))
  scanned_metrics = _restored_as_is(tmp_path / "unscanned", True, tmp_path / "scanned")
  back_metrics = _restored_as_is(tmp_path / "scanned", False, tmp_path / "back")
  unscanned = run_helpers.restore_params(tmp_path / "unscanned", 2)
  scanned = run_helpers.restore_params(tmp_path / "scanned", 1)
  back = run_helpers.restore_params(tmp_path / "back", 1)

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
  # The same model in either layout: the same eval outputs (loss and accuracies).
  for metrics in (scanned_metrics, back_metrics):
    for key in ("loss", "mlm_accuracy"):
      np.testing.assert_allclose(metrics[key], unscanned_metrics[key], rtol=2e-5, err_msg=key)


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
