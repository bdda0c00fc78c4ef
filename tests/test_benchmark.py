"""bench/benchmark: the PyTorch baseline (`--baseline=hf_torch`) end to end on CPU, its model and
first steps; the step tools (benchmark, benchmark_variants, profile_table, aot_compile) on a
host without TensorFlow."""

import dataclasses
import gzip
import importlib.util
import json
import math
import subprocess
import sys

import jax
import numpy as np
import pytest

from bert_jax import names
from bert_jax.bench import (
  benchmark,
  benchmark_gpu_attention,
  benchmark_gpu_layer_norm,
  trace_ops,
)
from bert_jax.cli import runner
from bert_jax.data import mask_positions
from bert_jax.models import families
from bert_jax.tasks import pretraining
from bert_jax.train.optimizer import OptimizerConfig
from tests import run_helpers

TINY = f"--config={run_helpers.REPO}/configs/bert_tiny.py"
# An H=64 BERT with 512 words on 8 x 32 tokens: a fraction of a second a step on CPU.
SMALL = {
  "model.hidden_size": 64,
  "model.num_heads": 2,
  "model.intermediate_size": 128,
  "model.vocab_size": 512,
}
# One layer (the jax step's compile is most of the test's time) and a given peak (no seconds of
# matmul timing for the MFU's denominator).
BENCHMARK = [
  TINY,
  *run_helpers.small_flags(**SMALL, **{"model.num_layers": 1, "peak_flops_per_device": 1e12}),
  "--steps=2",
  "--rounds=1",
]
SMALL_MODEL = families.model_config_from_dict(
  dict(
    vocab_size=512,
    hidden_size=64,
    num_layers=2,
    num_heads=2,
    intermediate_size=128,
    max_position_embeddings=64,
  )
)


def test_benchmark_times_hf_torch_with_bert_jax_on_a_host_without_tensorflow(tmp_path):
  pytest.importorskip("torch")
  pytest.importorskip("transformers")
  line = _run_without_tensorflow(
    "bert_jax.bench.benchmark", *BENCHMARK, "--baseline=hf_torch", f"--profile_dir={tmp_path}"
  )
  # --profile_dir: a trace of bert_jax's steps (XLA's ops, not PyTorch's), after the timing.
  ops = trace_ops.op_times(trace_ops.newest_trace(tmp_path))
  assert len(ops) > 20 and all(op.ns > 0 for op in ops)
  assert sum(op.launches for op in ops) % 3 == 0  # --profile_steps=3 runs of one program.
  assert (line["batch"], line["seq_len"], line["steps_timed"]) == (8, 32, 2)
  assert line["peak_flops"] == 1e12
  assert line["hf_torch_median_step_s"] > 0 and line["median_step_s"] > 0
  assert line["speedup_vs_hf_torch"] == pytest.approx(
    line["hf_torch_median_step_s"] / line["median_step_s"], rel=0.02
  )
  assert line["hf_torch_tokens_per_s"] == pytest.approx(
    8 * 32 / line["hf_torch_median_step_s"], rel=0.02
  )
  # Both timed with steps in flight too (on a CPU the step itself is synchronous, so the two
  # timings differ by noise and the loop's own time only).
  assert line["in_flight_step_s"] > 0 and line["hf_torch_in_flight_step_s"] > 0
  assert line["in_flight_speedup_vs_hf_torch"] == pytest.approx(
    line["hf_torch_in_flight_step_s"] / line["in_flight_step_s"], rel=0.02
  )
  # On CPU: float32 (bf16 autocast is for CUDA) and a CPU-time ratio, both said in the line.
  assert (line["hf_torch_device"], line["hf_torch_compute_dtype"]) == ("cpu", "float32")
  assert line["speedup_vs_hf_torch_cpu"] > 0 and line["hf_torch_compile"] is False
  assert line["hf_torch_versions"].startswith("torch ")
  # Same architecture: BERT's parameters, the tied decoder counted once on both sides.
  assert line["hf_torch_params"] == line["params"]


@pytest.fixture(name="one_torch_thread")
def _one_torch_thread():
  """torch on one thread: its thread pool spins for seconds a step on a busy shared CPU."""
  torch = pytest.importorskip("torch")
  threads = torch.get_num_threads()
  torch.set_num_threads(1)
  yield
  torch.set_num_threads(threads)


def test_hf_torch_model_is_bert_for_pretraining_and_its_first_steps_learn(one_torch_thread):
  del one_torch_thread
  transformers = pytest.importorskip("transformers")
  from bert_jax.bench import hf_torch_baseline  # pylint: disable=g-import-not-at-top

  config = dataclasses.replace(SMALL_MODEL, hidden_dropout_rate=0.0, attention_dropout_rate=0.0)
  batch = pretraining.PretrainingTask(config, 32, 5).random_batch(8)
  baseline = hf_torch_baseline.train_step(config, OptimizerConfig(learning_rate=1e-3), batch)
  reference = transformers.BertForPreTraining(
    transformers.BertConfig(
      vocab_size=512,
      hidden_size=64,
      num_hidden_layers=2,
      num_attention_heads=2,
      intermediate_size=128,
      max_position_embeddings=64,
    )
  )
  assert baseline.params == reference.num_parameters()
  losses = [float(baseline.step()) for _ in range(4)]
  # Near-uniform predictions at init: MLM ~ ln(vocab), NSP ~ ln(2).
  assert math.isfinite(losses[0])
  assert losses[0] == pytest.approx(math.log(512) + math.log(2), abs=0.3)
  assert losses[-1] < losses[0] - 0.05, losses  # The same batch four times: it is learnt.


@pytest.mark.parametrize(
  "family,classes",
  [
    ("bert", {"": "BertForPreTraining"}),
    ("albert", {"": "AlbertForPreTraining"}),
    ("distilbert", {"": "DistilBertForMaskedLM"}),
    ("roberta", {"": "RobertaForMaskedLM"}),
    ("electra", {"discriminator": "ElectraForPreTraining", "generator": "ElectraForMaskedLM"}),
  ],
)
def test_the_baselines_take_their_classes_from_the_family_export(family, classes):
  from bert_jax.bench import hf_export  # pylint: disable=g-import-not-at-top

  assert hf_export.architectures(dataclasses.replace(SMALL_MODEL, family=family)) == classes


def test_a_family_the_baselines_cannot_train_is_refused_in_one_line():
  from bert_jax.bench import hf_export, hf_torch_baseline  # pylint: disable=g-import-not-at-top
  from bert_jax.errors import UserInputError  # pylint: disable=g-import-not-at-top

  with pytest.raises(UserInputError, match="model.family='xlnet' pretrains with permutation_lm"):
    hf_export.architectures(dataclasses.replace(SMALL_MODEL, family="xlnet"))
  with pytest.raises(UserInputError, match="BertForPreTraining, not model.family='albert'"):
    hf_torch_baseline.check_config(dataclasses.replace(SMALL_MODEL, family="albert"))


def test_hf_flax_electra_baseline_learns_with_the_shared_step():
  """The replaced-token-detection baseline (two models, shared embeddings) runs the same
  jitted step as the masked-LM ones, and its loss falls on a repeated batch."""
  pytest.importorskip("transformers")
  import optax  # pylint: disable=g-import-not-at-top

  from bert_jax.bench import hf_flax_baseline  # pylint: disable=g-import-not-at-top

  config = dataclasses.replace(
    SMALL_MODEL,
    family="electra",
    num_layers=1,
    hidden_dropout_rate=0.0,
    attention_dropout_rate=0.0,
  )
  batch = pretraining.PretrainingTask(SMALL_MODEL, 16, 3).random_batch(4)
  hf_flax_baseline.check_config(config)
  step, state = hf_flax_baseline.train_step(config, optax.adam(1e-3))
  assert set(state[0]) == {"discriminator", "generator"}
  losses = []
  for i in range(3):
    *state, loss = step(*state, batch, jax.random.key(i))
    losses.append(float(loss))
  assert all(map(math.isfinite, losses)) and losses[-1] < losses[0], losses


def test_missing_torch_is_one_line_naming_the_install(monkeypatch, capsys):
  monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError.
  status = runner.run_absl(benchmark.main, ["benchmark", TINY, "--baseline=hf_torch"])
  err = capsys.readouterr().err.strip().splitlines()
  assert status == 2
  assert err[-1].startswith("error: --baseline=hf_torch needs PyTorch and transformers")
  assert err[-1].endswith("pip install -e '.[hf]'")


def test_masking_strategy_names_are_the_implemented_ones():
  # The config checks data.masking against names.py, so it loads without TensorFlow.
  assert tuple(mask_positions.POSITION_STRATEGIES) == names.MASKING_STRATEGIES


# Runs a module as `python -m` would, on a host where TensorFlow, TFDS and seqeval are not
# installed: their finders see nothing (as importlib does when a package is absent).
_NO_TENSORFLOW = """
import importlib.util, runpy, sys
HIDDEN = ("tensorflow", "tensorflow_datasets", "seqeval")

class Hide:
  def __init__(self, finder):
    self.finder = finder

  def find_spec(self, name, path=None, target=None):
    return None if name.split(".")[0] in HIDDEN else self.finder.find_spec(name, path, target)

  def __getattr__(self, attr):
    return getattr(self.finder, attr)

sys.meta_path[:] = [Hide(f) for f in sys.meta_path]
assert importlib.util.find_spec("tensorflow") is None
"""
_RUN_MODULE = """
module, sys.argv = sys.argv[1], sys.argv[1:]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def _run_tool(module, *argv):
  """The finished process of ``python -m module argv`` on a host without TensorFlow."""
  return subprocess.run(
    [sys.executable, "-c", _NO_TENSORFLOW + _RUN_MODULE, module, *argv],
    cwd=run_helpers.REPO,
    env=run_helpers.env(OMP_NUM_THREADS="1"),  # torch: see one_torch_thread.
    capture_output=True,
    text=True,
    timeout=300,
    check=False,
  )


def _json_lines(module, *argv):
  result = _run_tool(module, *argv)
  assert result.returncode == 0, result.stderr[-3000:]
  return [json.loads(line) for line in result.stdout.strip().splitlines()], result.stderr


def _run_without_tensorflow(module, *argv):
  return _json_lines(module, *argv)[0][-1]


def test_benchmark_variants_times_profiles_and_compiles_each_variant_its_way(tmp_path):
  lines, stderr = _json_lines(
    "bert_jax.bench.benchmark_variants",
    *BENCHMARK,
    "--variant=default",
    "--variant=rbg:prng=rbg",
    "--variant=no_dropout:model.hidden_dropout_rate=0,model.attention_dropout_rate=0",
    "--variant=bad:xla.xla_no_such_option=1",
    f"--profile_dir={tmp_path}/trace",
    "--profile_top=5",
    f"--hlo_dir={tmp_path}/hlo",
  )
  results = {line["variant"]: line for line in lines if "median_step_s" in line}
  assert list(results) == ["default", "rbg", "no_dropout"]  # bad did not compile; said why:
  assert "bad: did not compile" in stderr and "xla_no_such_option" in stderr
  assert results["default"]["speedup_vs_first"] == 1.0
  for line in results.values():
    assert line["median_step_s"] > 0 and line["batch"] == 8 and line["seq_len"] == 32
    assert line["speedup_vs_first"] == pytest.approx(
      results["default"]["median_step_s"] / line["median_step_s"], rel=0.02
    )
    assert line["in_flight_speedup_vs_first"] == pytest.approx(
      results["default"]["in_flight_step_s"] / line["in_flight_step_s"], rel=0.02
    )
  assert results["no_dropout"]["overrides"] == {
    "model.hidden_dropout_rate": "0",
    "model.attention_dropout_rate": "0",
  }
  # Each variant's own program (the compiled HLO's metadata names the ops it came from): rbg's
  # dropout bits come from XLA's RngBitGenerator, threefry's from its hash, and without
  # dropout no op is left of the dropout layers.
  hlo = {name: gzip.open(tmp_path / "hlo" / f"{name}.hlo.txt.gz", "rt").read() for name in results}
  assert "dropout/rng_bit_generator" in hlo["rbg"]
  assert "rng_bit_generator" not in hlo["default"] and "threefry" in hlo["default"]
  assert "/dropout/" in hlo["default"] and "/dropout/" not in hlo["no_dropout"]
  totals = {line["variant"]: line for line in lines if line.get("op") == "TOTAL"}
  assert set(totals) == set(results)
  for name, total in totals.items():
    rows = [line for line in lines if line.get("variant") == name and "op" in line][:-1]
    assert len(rows) == 5 and total["ops"] > 20 and total["ms_per_step"] > 0
    assert [row["ms_per_step"] for row in rows] == sorted(
      (row["ms_per_step"] for row in rows), reverse=True
    )
  # profile_table reads the same trace to the same total.
  table, _ = _json_lines(
    "bert_jax.bench.profile_table", f"--trace_dir={tmp_path}/trace/default", "--steps=3"
  )
  assert table[-1] == {key: totals["default"][key] for key in ("op", "ms_per_step", "share", "ops")}


# Bad input for each tool, the one-line error it must end with, and an id.
_REFUSALS = {
  "no_trace": (
    "bert_jax.bench.profile_table",
    ["--trace_dir={tmp}"],
    "no *.xplane.pb under --trace_dir=",
  ),
  "prng": ("bert_jax.bench.benchmark_variants", [TINY, "--variant=a:prng=philox"], "prng='philox'"),
  "repeat": (
    "bert_jax.bench.benchmark_variants",
    [TINY, "--variant=a", "--variant=a"],
    "names repeat",
  ),
  "no_key": (
    "bert_jax.bench.benchmark_variants",
    [TINY, "--variant=a:model.hidden=3"],
    "no key 'hidden'",
  ),
}

# After _NO_TENSORFLOW's finders: runs each [module, *argv] of the JSON list in argv[1] as its
# command line would (one module per process: the tools define their absl flags globally),
# and prints each run's exit status and stderr as one JSON list.
_RUN_EACH = """
import contextlib, importlib, io, json, sys
from bert_jax.cli import runner
results = []
for module, *argv in json.loads(sys.argv[1]):
  stderr = io.StringIO()
  with contextlib.redirect_stderr(stderr):
    status = runner.run_absl(importlib.import_module(module).main, [module, *argv])
  results.append([status, stderr.getvalue()])
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def refusals(tmp_path_factory):
  """{id: (exit status, stderr)} of each `_REFUSALS` run, one process per tool on a host without
  TensorFlow (an interpreter's start and imports are most of a refusal's time)."""
  tmp = tmp_path_factory.mktemp("refusals")
  by_module = {}
  for name, (module, argv, _) in _REFUSALS.items():
    by_module.setdefault(module, []).append((name, [arg.format(tmp=tmp) for arg in argv]))
  results = {}
  for module, cases in by_module.items():
    runs = json.dumps([[module, *argv] for _, argv in cases])
    child = subprocess.run(
      [sys.executable, "-c", _NO_TENSORFLOW + _RUN_EACH, runs],
      cwd=run_helpers.REPO,
      env=run_helpers.env(),
      capture_output=True,
      text=True,
      timeout=300,
      check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    lines = json.loads(child.stdout.strip().splitlines()[-1])
    results.update((name, tuple(line)) for (name, _), line in zip(cases, lines))
  return results


@pytest.mark.parametrize("name", list(_REFUSALS))
def test_variant_and_trace_tools_refuse_bad_input_in_one_line(refusals, name):
  status, stderr = refusals[name]
  assert status == 2, stderr[-2000:]
  last = stderr.strip().splitlines()[-1]
  message = _REFUSALS[name][2]
  assert last.startswith("error: ") and message in last, last


@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="needs libtpu")
def test_aot_compile_runs_without_tensorflow():
  no_dropout = {"model.hidden_dropout_rate": 0.0, "model.attention_dropout_rate": 0.0}
  flags = run_helpers.small_flags(**SMALL, **no_dropout, **{"model.num_layers": 1})
  report = _run_without_tensorflow("bert_jax.tools.aot_compile", TINY, "--topology=v5e-1", *flags)
  assert report["fits"] is True and report["compiled_flops"] > 0
  assert np.isclose(report["flops_ratio"], report["compiled_flops"] / report["model_flops"])


def test_gpu_layer_norm_tool_runs_on_a_cpu_and_compares_the_kernels_with_flax(capsys):
  status = runner.run_absl(
    benchmark_gpu_layer_norm.main,
    ["benchmark_gpu_layer_norm", "--shapes=64x48", "--norm_repeats=1", "--norm_launch=2/4/2/8/4"],
  )
  assert status == 0
  lines = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
  assert [line["kind"] for line in lines] == [
    "xla_flax",
    "xla_custom_vjp",
    "triton",
    "triton[2/4/2/8/4]",
  ]
  for line in lines:
    assert (line["rows"], line["width"]) == (64, 48) and line["fwd_bwd_ms"] > 0
  for line in lines[1:]:  # Against Flax's: bf16 outputs, at most an ulp or two of ~4.
    assert line["max_abs_error_y"] <= 2**-6 and line["max_abs_error_dx"] <= 2**-5


def test_gpu_attention_tool_runs_on_a_cpu_and_says_where_cudnn_is_missing(capsys):
  status = runner.run_absl(
    benchmark_gpu_attention.main,
    ["benchmark_gpu_attention", "--points=2x64", "--timed_repeats=1", "--flash_launch=32/4/16/2/1"],
  )
  assert status == 0
  lines = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
  checks = {line["check"]: line for line in lines if "check" in line}
  timed = {line["kind"]: line for line in lines if "kind" in line}
  assert set(checks) == {"cudnn_mask_vs_xla", "cudnn_dropout"}
  assert list(timed) == [
    "bert_jax_dense_dropout",
    "bert_jax_dense",
    "bert_jax_flash_dropout",
    "bert_jax_flash",
    "xla_fused",
    "cudnn_mask",
    "cudnn_lengths",
    "cudnn_lengths_dropout",
    "bert_jax_flash_packed_dropout",
    "bert_jax_flash_packed_dropout[32/4/16/2/1]",
  ]
  for name, line in timed.items():
    assert (line["batch"], line["seq"]) == (2, 64)
    if name.startswith("cudnn") and jax.default_backend() == "cpu":
      assert "cuDNN" in line["error"]  # Said per line; the other kinds still ran.
    else:
      assert line["fwd_bwd_ms"] > 0
