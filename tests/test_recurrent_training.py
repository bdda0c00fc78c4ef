"""Segment-level recurrence on the one trainer (data.objective='clm', Transformer-XL memory):
resumed == uninterrupted with the memory in the checkpoint, sharded == unsharded and
accumulated == one batch with non-empty memory (families transformer_xl and xlnet),
2 processes == 1, eval at other memory lengths through the trainer's eval."""

import importlib.util
import pathlib

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from bert_jax.data.segment_batches import SegmentData
from bert_jax.parallel import mesh as mesh_lib
from bert_jax.parallel import sharding
from bert_jax.tasks import causal_lm
from bert_jax.train import memory_eval, setup
from bert_jax.train.loop import train_and_evaluate
from bert_jax.train.settings import settings_from_config
from tests import run_helpers

CONFIG = "configs/transformer_xl_tiny.py"
# configs/transformer_xl_tiny.py shrunk to a few-second CPU run: 16-token segments, 16 memory
# positions in training and 32 at eval, 4 eval segments per stream.
SMALL = {
  "num_train_steps": 4,
  "global_batch_size": 8,
  "log_every_steps": 1,
  "eval_every_steps": 4,
  "checkpoint_every_steps": 2,
  "compilation_cache_dir": "",
  "model.hidden_size": 32,
  "model.num_heads": 4,
  "model.intermediate_size": 64,
  "model.recurrence.mem_len": 16,
  "model.recurrence.eval_mem_len": 32,
  "data.max_seq_length": 16,
  "data.num_eval_examples": 32,
  "optimizer.warmup_steps": 2,
}


def _load(path):
  spec = importlib.util.spec_from_file_location(path.stem, run_helpers.REPO / path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config()


def _config(**overrides):
  config = _load(pathlib.Path(CONFIG))
  for key, value in {**SMALL, **overrides}.items():
    node = config
    *parents, leaf = key.split(".")
    for parent in parents:
      node = node[parent]
    node[leaf] = value
  return config


def _restore_state(workdir, step):
  """A checkpoint's whole train state (params, optimizer state, memory) as numpy arrays."""
  path = workdir / "checkpoints" / str(step) / "state"
  device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  with ocp.StandardCheckpointer() as checkpointer:
    metadata = checkpointer.metadata(path).item_metadata.tree
    target = jax.tree.map(
      lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device), metadata
    )
    return jax.tree.map(np.asarray, checkpointer.restore(path, target))


@pytest.fixture(scope="module")
def data(small_corpus_keys):
  """The small corpus as 8 streams of 16-token segments (tokenised once)."""
  return SegmentData(settings_from_config(_config(**small_corpus_keys)).data, model_vocab_size=8192)


@pytest.fixture(scope="module")
def whole(tmp_path_factory, small_corpus_keys):
  """An uninterrupted 4-step run on the 8 fake devices: (workdir, its last eval metrics)."""
  workdir = tmp_path_factory.mktemp("clm") / "whole"
  return workdir, train_and_evaluate(_config(**small_corpus_keys), str(workdir))


def test_resume_mid_document_continues_bitwise_memory_included(
  tmp_path, small_corpus_keys, data, whole
):
  train = data.stream("train", 8)
  # Segment 2 (the first after the stop) continues segment 1's document in some rows: their
  # first tokens attend to the memory the checkpoint must carry.
  continues_R = train.batch(1)["document_ids"][:, -1] == train.batch(2)["document_ids"][:, 0]
  assert continues_R.any()
  whole_dir, whole_eval = whole
  train_and_evaluate(_config(**small_corpus_keys, num_train_steps=2), str(tmp_path / "resumed"))
  stopped = _restore_state(tmp_path / "resumed", 2)
  assert np.abs(stopped["memory"]["hidden"][0]).max() > 0  # The memory is saved, not empty.
  np.testing.assert_array_equal(
    stopped["memory"]["ids"][:, -1], train.batch(1)["document_ids"][:, -1]
  )
  resumed = train_and_evaluate(_config(**small_corpus_keys), str(tmp_path / "resumed"))
  assert resumed == whole_eval  # Eval metrics, with eval's own 32-position memory.
  jax.tree.map(
    np.testing.assert_array_equal,
    _restore_state(tmp_path / "resumed", 4),
    _restore_state(whole_dir, 4),
  )
  rows = {"whole": run_helpers.read_metrics(whole_dir)}
  rows["resumed"] = run_helpers.read_metrics(tmp_path / "resumed")
  assert [r["step"] for r in rows["resumed"]] == [1, 2, 3, 4]
  for a, b in zip(rows["whole"], rows["resumed"]):
    for key in ("loss", "accuracy", "perplexity", "grad_norm"):
      assert a[key] == b[key], (key, a["step"])
  assert set(rows["whole"][0]) >= {"loss", "accuracy", "perplexity", "bits_per_token"}


def test_eval_memory_lengths_reuse_the_trainers_eval(whole, small_corpus_keys, data):
  whole_dir, whole_eval = whole
  results = memory_eval.held_out_metrics(
    settings_from_config(_config(**small_corpus_keys)), str(whole_dir), [32, 0], data
  )
  assert results[32] == whole_eval  # The run's own eval: 32 memory positions.
  assert results[0]["loss"] != results[32]["loss"]  # Without memory it reads differently.


@pytest.mark.parametrize(
  "name,rows,segment,memory,eval_memory",
  [("base", 64, 150, (16, 150, 410), 640), ("large", 128, 384, (18, 384, 1024), 1600)],
)
def test_paper_configs_resolve_to_the_papers_shapes(name, rows, segment, memory, eval_memory):
  settings = settings_from_config(_load(pathlib.Path(f"configs/transformer_xl_{name}.py")))
  task = causal_lm.make_task(settings.model, settings.data)
  assert (task.segment_len, task.eval_mem_len) == (segment, eval_memory)
  shapes = jax.eval_shape(
    lambda: task.init_memory(settings.trainer.global_batch_size, task.mem_len)
  )
  layers, mem_len, width = memory
  assert [h.value.shape for h in shapes["hidden"]] == [(rows, mem_len, width)] * layers
  assert settings.model.head_dim == width // settings.model.num_heads


def _two_steps(config, devices, data):
  """Two real train steps (the second reads the first's memory) on a mesh over ``devices``."""
  settings = settings_from_config(config)
  mesh = mesh_lib.make_mesh(settings.mesh, devices=devices)
  train = data.stream("train", settings.trainer.global_batch_size)
  with setup.mesh_context(mesh, settings.mesh.logical_axis_rules):
    training = setup.build_training(settings, mesh, data)
    state = setup.fresh_state(training)
    rng = jax.device_put(jax.random.key(1), sharding.replicated(mesh))
    for step in range(2):
      batch = sharding.host_batch_to_global(train.batch(step), mesh)
      state, metrics = training.train_step(state, batch, rng)
    specs = {s.spec for s in jax.tree.leaves(training.state_shardings.memory)}
    return jax.device_get((metrics, state.params, state.memory)), specs


# Without dropout, so that one run is the reference of both the meshes and the accumulation.
NO_DROPOUT = {"model.hidden_dropout_rate": 0.0, "model.attention_dropout_rate": 0.0}


@pytest.fixture(scope="module")
def one_device(data):
  """family -> its two steps on one device (computed once per family)."""
  results = {}

  def get(family):
    if family not in results:
      config = _config(**NO_DROPOUT, **{"mesh.data": 1, "model.family": family})
      results[family] = _two_steps(config, jax.devices()[:1], data)[0]
    return results[family]

  return get


@pytest.mark.parametrize(
  "family,axes",
  [("transformer_xl", {"mesh.data": 8}), ("xlnet", {"mesh.data": 2, "mesh.tensor": 4})],
  ids=["transformer_xl-data8", "xlnet-data2xtensor4"],
)
def test_sharded_steps_with_memory_equal_one_device(one_device, data, family, axes):
  config = _config(**NO_DROPOUT, **axes, **{"model.family": family})
  (metrics, params, memory), specs = _two_steps(config, jax.devices(), data)
  # The memory is split over the data-parallel devices, never replicated whole.
  assert all(spec[0] == "data" for spec in specs), specs
  metrics_1, params_1, memory_1 = one_device(family)
  for key in ("lm_loss", "lm_accuracy", "grad_norm"):
    np.testing.assert_allclose(metrics[key], metrics_1[key], rtol=2e-5, err_msg=key)
  close = lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-4)
  jax.tree.map(close, params, params_1)
  jax.tree.map(close, memory, memory_1)
  np.testing.assert_array_equal(memory["ids"], memory_1["ids"])


def test_gradient_accumulation_keeps_each_rows_memory(one_device, data):
  (metrics_a, params_a, memory_a), _ = _two_steps(
    _config(
      **NO_DROPOUT,
      **{"mesh.data": 1, "model.family": "transformer_xl", "gradient_accumulation_steps": 2},
    ),
    jax.devices()[:1],
    data,
  )
  metrics_1, params_1, memory_1 = one_device("transformer_xl")
  np.testing.assert_allclose(metrics_a["lm_loss"], metrics_1["lm_loss"], rtol=1e-5)
  close = lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-4)
  jax.tree.map(close, params_a, params_1)
  jax.tree.map(close, memory_a, memory_1)  # Rows keep their own memory through the split.


def test_two_processes_give_the_same_losses_and_memory_as_one(tmp_path, small_corpus_keys, whole):
  whole_dir, _ = whole
  flags = [f"--config.{k}={v}" for k, v in {**SMALL, **small_corpus_keys}.items()]
  # Started the way Open MPI's mpirun starts them: its variables, no coordinator flags.
  run = run_helpers.run_two_processes(tmp_path, flags, config=CONFIG, launcher="ompi")
  assert run.codes == [0, 0], run.errors
  for i, stderr in enumerate(run.stderr):
    assert "Open MPI (mpirun), coordinator 127.0.0.1:" in stderr, stderr[-3000:]
    assert f"; process {i} of 2; 2 local / 4 global devices (cpu)" in stderr
  # Each process built only its 4 rows; together they are the one-process run on 8 devices.
  for split in ("train", "eval"):
    one, two = (run_helpers.read_metrics(w, split) for w in (whole_dir, tmp_path))
    assert [r["step"] for r in two] == [r["step"] for r in one] and two
    for a, b in zip(one, two):
      assert b["loss"] == pytest.approx(a["loss"], rel=1e-5), (split, a["step"])
  memory_1, memory_2 = (_restore_state(w, 4)["memory"] for w in (whole_dir, tmp_path))
  np.testing.assert_array_equal(memory_2["ids"], memory_1["ids"])
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-4), memory_2, memory_1
  )


def test_adaptive_softmax_trains_every_cluster(data):
  """model.adaptive (two tail clusters, div_val 2, tied tail projections) through the trainer's
  step: the loss is the adaptive softmax's (its HF parity: test_transformer_xl_hf_equivalence),
  and two steps move every cluster's table, projection and bias."""
  adaptive = {
    "model.adaptive.cutoffs": (1000, 4000),
    "model.adaptive.div_val": 2,
    "model.adaptive.tie_projs": (False, True, True),
  }
  settings = settings_from_config(_config(**NO_DROPOUT, **adaptive, **{"mesh.data": 1}))
  mesh = mesh_lib.make_mesh(settings.mesh, devices=jax.devices()[:1])
  train = data.stream("train", settings.trainer.global_batch_size)
  with setup.mesh_context(mesh, settings.mesh.logical_axis_rules):
    training = setup.build_training(settings, mesh, data)
    state = setup.fresh_state(training)
    before = jax.device_get(state.params)
    rng = jax.device_put(jax.random.key(1), sharding.replicated(mesh))
    losses = []
    for step in range(2):
      state, metrics = training.train_step(
        state, sharding.host_batch_to_global(train.batch(step), mesh), rng
      )
      losses.append(float(metrics["lm_loss"]) / float(metrics["lm_weight"]))
  after = jax.device_get(state.params)
  assert all(0 < loss < 2 * np.log(8192) for loss in losses), losses
  assert after["bert"]["word_embedding_2"]["embedding"].shape == (8192 - 4000, 32 // 4)
  assert sorted(k for k in after if k.startswith("output_")) == [
    "output_bias", "output_bias_1", "output_bias_2", "output_projection"
  ]  # fmt: skip
  moved = jax.tree.map(lambda a, b: float(np.abs(a - b).max()), after, before)
  for i in ("", "_1", "_2"):
    assert moved["bert"][f"word_embedding{i}"]["embedding"] > 0, i
    assert moved["bert"][f"embedding_projection{i}"]["kernel"] > 0, i
    assert moved[f"output_bias{i}"] > 0, i
  assert moved["cluster_weight"] > 0 and moved["cluster_bias"] > 0
