"""Ahead-of-time compiles of the real train step for TPU topologies on this CPU host (libtpu
compiles; nothing runs): memory, FLOPs, shardings, multi-slice meshes and refusals."""

import importlib.util
import json
import pathlib
import re

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from bert_jax.errors import UserInputError
from bert_jax.parallel import topologies
from bert_jax.tools import aot_compile, compiled_ops
from bert_jax.train import flops, run_state
from bert_jax.train.settings import settings_from_config
from tests import helpers, run_helpers

needs_libtpu = pytest.mark.skipif(
  importlib.util.find_spec("libtpu") is None,
  reason="libtpu is not installed (pip install -e '.[tpu]'), so nothing compiles for TPU",
)

# No dropout: its random-bit ops take a quarter of the compile time and change no shapes.
NO_DROPOUT = {"model.hidden_dropout_rate": 0.0, "model.attention_dropout_rate": 0.0}
# fsdp x tensor sharding on the 4 chips of a v4-8, three layers in one scanned body.
V4_8 = {
  "model.num_layers": 3,
  "model.dtype": "bfloat16",
  "mesh.data": 1,
  "mesh.fsdp": 2,
  "mesh.tensor": 2,
  **NO_DROPOUT,
}


@pytest.fixture(scope="module")
def v4_8():
  return aot_compile.aot_compile(
    helpers.small_config(**V4_8, **{"model.scan_layers": True}), "v4-8"
  )


def _input_bytes_per_device(result, argument=None):
  """Bytes of one device's shards of the arguments (or argument number ``argument`` alone), as
  the shardings say (no TPU padding); inputs the program never reads are not passed."""
  shardings, avals = result.compiled.input_shardings[0], result.compiled.in_avals[0]
  if argument is not None:
    shardings, avals = shardings[argument], avals[argument]
  by_path = {jax.tree_util.keystr(path): aval for path, aval in _with_paths(avals)}
  total = 0
  for path, sharding in _with_paths(shardings):
    aval = by_path[jax.tree_util.keystr(path)]
    total += np.prod(sharding.shard_shape(aval.shape), dtype=np.int64) * aval.dtype.itemsize
  return int(total)


def _with_paths(tree):
  return jax.tree_util.tree_flatten_with_path(tree)[0]


@needs_libtpu
def test_v4_8_memory_is_the_sharded_state_and_fits(v4_8):
  report = v4_8.report
  assert report["devices"] == 4 and report["mesh"] == {"data": 1, "fsdp": 2, "tensor": 2}
  memory = report["memory"]
  raw_inputs = _input_bytes_per_device(v4_8)
  # Arguments are the device's shards of state, batch and key (TPU tiling pads small arrays);
  # the donated state comes back in the same buffers.
  assert raw_inputs <= memory["arguments"] <= 1.5 * raw_inputs
  assert 0.9 * memory["arguments"] <= memory["aliased"] <= memory["outputs"]
  assert memory["total"] == (
    memory["arguments"]
    + memory["outputs"]
    - memory["aliased"]
    + memory["temporaries"]
    + memory["code"]
  )
  assert report["fits"] and 0 < memory["total"] < report["hbm_bytes"] == int(30.75 * 2**30)


@needs_libtpu
def test_v4_8_flops_and_roofline_are_consistent(v4_8):
  report = v4_8.report
  assert report["cost_source"] == "unrolled 1- and 2-layer compiles, extrapolated"
  # Compiled FLOPs add softmax, layer norm, dropout and the optimizer to the matmuls counted
  # by the model formula.
  assert 1.0 < report["flops_ratio"] < 1.3
  assert not report["flops_lower_bound"]
  roofline = report["roofline"]
  assert roofline["compute_s"] == pytest.approx(report["compiled_flops"] / 275e12)
  assert roofline["memory_s"] == pytest.approx(report["bytes_accessed"] / 1.2e12)
  step_s = max(roofline["compute_s"], roofline["memory_s"])
  assert roofline["mfu_ceiling"] == pytest.approx(report["model_flops"] / 275e12 / step_s)
  assert roofline["compute_mfu_ceiling"] == pytest.approx(1 / report["flops_ratio"])
  assert 0 < roofline["mfu_ceiling"] <= roofline["compute_mfu_ceiling"] < 1
  # libtpu's per-op estimate, at v4's 1.05 GHz: no faster than the FLOPs at peak.
  estimate = report["compiler_estimate"]
  assert estimate["step_s"] == pytest.approx(estimate["cycles"] / 1.05e9)
  assert estimate["mfu"] == pytest.approx(report["model_flops"] / 275e12 / estimate["step_s"])
  assert roofline["compute_s"] < estimate["step_s"] and 0 < estimate["mfu"] < 1


@needs_libtpu
@pytest.mark.parametrize("name", ["v4-8", "v5e-4", "v5p-8"])
def test_the_clock_turns_a_matmuls_estimated_cycles_into_its_time_at_peak(name):
  """An 8192^3 bf16 matmul is compute-bound: libtpu's cycles over the chip's clock must give
  about its FLOPs over the chip's peak (a wrong clock or peak is off by its own ratio)."""
  topology = topologies.get_topology(name)
  mesh = jax.sharding.Mesh(np.array(topologies.topology_devices(topology)[:1]), ("x",))
  size = 8192
  matrix = jax.ShapeDtypeStruct((size, size), jax.numpy.bfloat16, sharding=NamedSharding(mesh, P()))
  compiled = jax.jit(lambda a, b: a @ b).lower(matrix, matrix).compile()
  estimated_s = compiled_ops.estimated_cycles(compiled.as_text()) / topology.chip.clock_hz
  at_peak_s = 2 * size**3 / flops.device_kind_peak_flops(topology.chip.device_kind)
  assert 1.0 < estimated_s / at_peak_s < 1.2


@needs_libtpu
def test_dropout_masks_never_reach_memory_in_the_compiled_bf16_step():
  """The masks are hashes of positions, recomputed inside the fusions that apply them: no
  boolean array of an activation's size is a result of the step's entry computation (the
  threefry masks were, in halves: [B, L, D/2] and [B, H, L, L/2]); the [B, L, L] padding mask
  is the one allowed."""
  config = helpers.small_config(**{"model.num_layers": 1, "model.dtype": "bfloat16"})
  result = aot_compile.aot_compile(config, "v5e-1")
  batch, length = config.global_batch_size, config.data.max_seq_length
  masks = []
  for line in compiled_ops.entry_lines(result.compiled.as_text()):
    result_type = line.split(" = ", 1)[1].split("(", 1)[0] if " = " in line else ""
    for dims in re.findall(r"\bpred\[([0-9,]+)\]", result_type):
      shape = tuple(int(d) for d in dims.split(","))
      if len(shape) >= 3 and np.prod(shape) >= batch * length * 16:
        masks.append(shape)
  assert masks and set(masks) == {(batch, length, length)}, masks


@needs_libtpu
def test_the_op_table_names_the_ops_with_the_most_estimated_time(capsys):
  flags = run_helpers.small_flags(**{"model.num_layers": 1, **NO_DROPOUT})
  status = aot_compile.main(
    ["aot_compile", "--config=configs/bert_tiny.py", "--topology=v5e-1", "--op_table=4", *flags]
  )
  out, err = capsys.readouterr()
  assert status == 0, err[-2000:]
  report = json.loads(out.strip().splitlines()[-1])
  rows = [line for line in err.splitlines() if re.match(r"^ +\d+\.\d{3} ms ", line)]
  assert len(rows) == 4, err[-2000:]
  times = [float(row.split()[0]) for row in rows]
  assert times == sorted(times, reverse=True)
  assert sum(times) <= report["compiler_estimate"]["step_s"] * 1e3 * 1.001
  # Source ops, named without the jitted function (a tiny step's largest is AdamW's update).
  assert not any(row.split()[-1].startswith("jit(") for row in rows), rows


@needs_libtpu
def test_v4_8_params_are_sharded_as_the_rules_say(v4_8):
  params = v4_8.compiled.input_shardings[0][0].params
  layer = params["bert"]["encoder"]["layers"]["block"]
  expected = {  # (layers, ...) leading axis replicated; embed -> fsdp; vocab/heads/mlp -> tensor.
    "word_embeddings": (
      params["bert"]["embeddings"]["word_embeddings"]["embedding"],
      P("tensor", "fsdp"),
    ),
    "query": (layer["attention"]["query"]["kernel"], P(None, "fsdp", "tensor", None)),
    "intermediate": (layer["intermediate"]["kernel"], P(None, "fsdp", "tensor")),
    "output": (layer["output"]["kernel"], P(None, "tensor", "fsdp")),
    "norm": (layer["output_norm"]["scale"], P(None, None)),
  }
  for name, (sharding, spec) in expected.items():
    ndim = len(spec)
    assert sharding.is_equivalent_to(NamedSharding(v4_8.mesh, spec), ndim), (name, sharding)


@needs_libtpu
def test_scanned_flops_equal_the_unrolled_step(v4_8):
  unrolled = aot_compile.aot_compile(helpers.small_config(**V4_8), "v4-8").report
  assert unrolled["cost_source"] == "compiled step"
  assert v4_8.report["compiled_flops"] == pytest.approx(unrolled["compiled_flops"], rel=5e-3)
  assert v4_8.report["bytes_accessed"] == pytest.approx(unrolled["bytes_accessed"], rel=3e-2)


@needs_libtpu
def test_two_v5e_slices_are_data_parallel_across_the_dcn():
  config = helpers.small_config(**{"model.num_layers": 1, **NO_DROPOUT})
  result = aot_compile.aot_compile(config, "v5e-4", num_slices=2)
  report = result.report
  assert report["devices"] == 8 and report["device_kind"] == "TPU v5 lite"
  assert report["mesh_ici"] == {"data": 4, "fsdp": 1, "tensor": 1}
  assert report["mesh_dcn"] == {"data": 2, "fsdp": 1, "tensor": 1}
  slices = [d.slice_index for d in result.mesh.devices[:, 0, 0]]
  assert slices == [0, 0, 0, 0, 1, 1, 1, 1]
  assert report["fits"] and report["memory"]["arguments"] > 0
  # One sequence per device: the replicated AdamW update weighs more than at scale.
  assert 1.0 < report["flops_ratio"] < 1.5


@pytest.mark.parametrize(
  "topology,overrides,message",
  [
    ("v9-8", {}, "unknown TPU topology 'v9-8'; valid topologies: v4-8, v4-16, v4-32, "),
    (
      "v4-8",
      {"mesh.data": 3},
      "mesh data=3 fsdp=1 tensor=1 does not divide the 4 devices; valid axis sizes: 1, 2, 4,",
    ),
    (
      "v4-8",
      {"global_batch_size": 6},
      (
        "global_batch_size / gradient_accumulation_steps = 6 does not divide over the 4 "
        "data-parallel devices (mesh data x fsdp); valid global_batch_size values: multiples of 4 "
        "(4, 8, ...)"
      ),
    ),
  ],
  ids=["topology", "mesh", "batch"],
)
def test_bad_input_names_the_valid_choices(topology, overrides, message):
  if topology in topologies.TOPOLOGIES and importlib.util.find_spec("libtpu") is None:
    pytest.skip("libtpu is not installed (pip install -e '.[tpu]'); no TPU devices to check")
  with pytest.raises(UserInputError) as error:
    aot_compile.aot_compile(helpers.small_config(**overrides), topology)
  assert str(error.value).startswith(message)


def test_without_libtpu_the_error_names_the_install(monkeypatch):
  monkeypatch.setattr(topologies.importlib.util, "find_spec", lambda name: None)
  with pytest.raises(UserInputError, match=r"pip install -e '\.\[tpu\]'"):
    topologies.topology_devices(topologies.get_topology("v4-8"))


@needs_libtpu
def test_a_step_over_hbm_is_refused_with_one_line_and_exit_2(capsys):
  # A 16M-word vocabulary: embeddings, gradients and Adam moments need ~35 GiB on one v5e chip.
  flags = run_helpers.small_flags(
    **{"model.vocab_size": 2**24, "model.num_layers": 1, "model.hidden_dropout_rate": 0.0}
  )
  status = aot_compile.main(
    ["aot_compile", "--config=configs/bert_tiny.py", "--topology=v5e-1", *flags]
  )
  out, err = capsys.readouterr()
  assert status == 2, err[-2000:]
  report = json.loads(out.strip().splitlines()[-1])
  assert report["fits"] is False and report["memory"] is None
  assert report["argv"].startswith("--config=configs/bert_tiny.py --topology=v5e-1")
  error_line = err.strip().splitlines()[-1]
  assert error_line.startswith(
    "error: the train step does not fit v5e-1: the compiler ran out "
    "of the 15.75 GiB HBM of a TPU v5 lite: Ran out of memory"
  ), error_line
  assert "exceeds available HBM (15.75G); shard the state (mesh.fsdp)" in error_line


def test_the_command_line_refuses_an_unknown_topology_with_exit_2(capsys):
  status = aot_compile.main(["aot_compile", "--config=configs/bert_tiny.py", "--topology=v4-30"])
  assert status == 2
  assert capsys.readouterr().err.startswith(
    "error: unknown TPU topology 'v4-30'; valid topologies: v4-8, v4-16, v4-32, "
  )


def _config_json_only(directory, config):
  """``directory`` holding the config.json a run of ``config`` writes, and no weights."""
  settings = settings_from_config(config)
  run_state.write_config_json(
    directory, run_state.resolved_config(config, settings.model, directory)
  )
  return directory, settings.model


# A 4-layer scanned BERT teacher (config.json only) and a 2-layer DistilBERT student of its
# width, fsdp x tensor on the 4 chips of a v4-8.
TEACHER = {"model.num_layers": 4, "model.scan_layers": True}
STUDENT = {
  **V4_8,
  "task": "distillation",
  "model.family": "distilbert",
  "model.num_layers": 2,
  "data.objective": "none",
}


@pytest.fixture(scope="module")
def distillation_v4_8(tmp_path_factory):
  teacher, teacher_model = _config_json_only(
    tmp_path_factory.mktemp("teacher"), helpers.small_config(**TEACHER)
  )
  config = helpers.small_config(**STUDENT, **{"distillation.teacher": str(teacher)})
  return aot_compile.aot_compile(config, "v4-8"), teacher_model, settings_from_config(config)


@needs_libtpu
def test_distillation_step_compiles_with_the_teacher_from_its_config_json(distillation_v4_8):
  result, teacher, settings = distillation_v4_8
  report, student = result.report, settings.model
  assert not (pathlib.Path(settings.distillation.teacher) / "checkpoints").exists()
  assert report["teacher"] == {
    "family": "bert",
    "layers": 4,
    "hidden": 128,
    "heads": 4,
    "scan": True,
  }
  # The teacher's parameters are the third argument, sharded by the student's rules.
  teacher_shardings = result.compiled.input_shardings[0][2]
  embedding = teacher_shardings["bert"]["embeddings"]["word_embeddings"]["embedding"]
  assert embedding.is_equivalent_to(NamedSharding(result.mesh, P("tensor", "fsdp")), 2)
  query = teacher_shardings["bert"]["encoder"]["layers"]["block"]["attention"]["query"]["kernel"]
  assert query.is_equivalent_to(NamedSharding(result.mesh, P(None, "fsdp", "tensor", None)), 4)
  teacher_bytes = _input_bytes_per_device(result, argument=2)
  memory = report["memory"]
  assert 0 < teacher_bytes < _input_bytes_per_device(result) <= memory["arguments"]
  # Only the student's state is donated; the teacher's parameters stay for the next step.
  assert memory["aliased"] <= memory["arguments"] - teacher_bytes
  assert report["fits"]
  # Model FLOPs: the student's train step and the teacher's forward pass (a third of its
  # train FLOPs); the scanned teacher is counted unrolled, so compiled FLOPs cover both.
  assert report["model_flops"] == pytest.approx(
    (
      flops.train_flops_per_step(student, 8, 32, 5)
      + flops.train_flops_per_step(teacher, 8, 32, 5) / 3
    )
    / 4
  )
  assert report["cost_source"] == "unrolled 1- and 2-layer compiles, extrapolated"
  assert 1.0 < report["flops_ratio"] < 1.3, report["flops_ratio"]


@needs_libtpu
def test_flops_inside_splash_attention_are_reported_as_not_counted():
  # No attention dropout and a length of 128: "auto" attention is the splash (Pallas) kernel on
  # TPU, whose matmuls XLA's cost analysis does not see.
  config = helpers.small_config(
    **NO_DROPOUT,
    **{
      "model.num_layers": 1,
      "model.max_position_embeddings": 128,
      "data.max_seq_length": 128,
      "data.max_predictions_per_seq": 20,
    },
  )
  report = aot_compile.aot_compile(config, "v4-8").report
  assert report["flops_lower_bound"]
  assert report["flops_not_counted"] == "Pallas kernels (splash attention) not counted"
  assert "a lower bound: Pallas kernels" in aot_compile.summary(report)
