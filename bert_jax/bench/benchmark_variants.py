"""Variants of one config's train step, compiled together and timed side by side.

  python -m bert_jax.bench.benchmark_variants --config=configs/bert_base.py \
      --config.model.dtype=bfloat16 --config.global_batch_size=256 \
      --variant=default --variant=rbg:prng=rbg \
      --variant=no_dropout:model.hidden_dropout_rate=0,model.attention_dropout_rate=0 \
      --variant=cublas:xla.xla_gpu_enable_triton_gemm=false --baseline=hf_torch

Answers "does this change make the step faster on this accelerator" in one process: every
variant is built and compiled in turn (later compiles reuse the first one's GEMM autotuning
results), and the timed steps alternate between variants in rounds, so all see
the same machine. A variant is ``NAME[:SETTING,SETTING...]`` where a setting is a config
override (``model.attention_kind=dense``), ``prng=IMPL`` (the dropout key's implementation:
``threefry2x32``, ``rbg`` or ``unsafe_rbg``) or ``xla.OPTION=VALUE`` (an XLA compiler option for
this variant's compile). Prints one JSON line per variant: median step, MFU, compile seconds and
the ratio to the first variant (and to ``--baseline=hf_torch``, Hugging Face's PyTorch BERT, when
asked), each step waited for and, as ``in_flight_*``, with steps kept in flight as the trainer
runs them (`step_timing`). ``--profile_dir`` traces a few steps of each variant into ``<dir>/<name>`` and prints its
top HLO ops (`bench/profile_table`); ``--hlo_dir`` writes each compiled step's HLO text.
"""

import dataclasses
import gzip
import json
import os
import pathlib
import sys
import time

from absl import flags
from ml_collections import config_flags

from bert_jax import environment
from bert_jax.bench import step_timing
from bert_jax.cli import runner
from bert_jax.errors import UserInputError

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file.", lock_config=True)
_VARIANTS = flags.DEFINE_multi_string(
  "variant", ["default"], "NAME[:SETTING,...]; a setting is KEY=VALUE, prng=IMPL or xla.OPT=V."
)
_STEPS = flags.DEFINE_integer("steps", 20, "Timed steps per variant (after two warm-up steps).")
_ROUNDS = flags.DEFINE_integer("rounds", 4, "Alternating rounds the timed steps are split into.")
_BASELINE = flags.DEFINE_enum("baseline", "none", ["none", "hf_torch"], "Also time a baseline.")
_PROFILE_DIR = flags.DEFINE_string("profile_dir", None, "Trace each variant into <dir>/<name>.")
_PROFILE_STEPS = flags.DEFINE_integer("profile_steps", 3, "--profile_dir: steps traced.")
_PROFILE_TOP = flags.DEFINE_integer("profile_top", 25, "--profile_dir: HLO ops printed.")
_HLO_DIR = flags.DEFINE_string("hlo_dir", None, "Write <dir>/<name>.hlo.txt.gz per variant.")
_COMPILE_BUDGET = flags.DEFINE_float(
  "compile_budget_s", 1e9, "Variants whose compile would start after this many seconds are skipped."
)

_PRNG_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")


@dataclasses.dataclass(frozen=True)
class Variant:
  """One way of building the step.

  Attributes:
    name: label in the output.
    overrides: config key (dotted) -> value string.
    prng: the dropout key's PRNG implementation.
    compiler_options: XLA option -> value, for this variant's compile only.
  """

  name: str
  overrides: dict
  prng: str = "threefry2x32"
  compiler_options: dict = dataclasses.field(default_factory=dict)


def parse_variant(text: str) -> Variant:
  """``NAME[:SETTING,...]`` as a `Variant`.

  Raises:
    UserInputError: a setting is not ``KEY=VALUE`` or names an unknown PRNG.
  """
  name, _, settings = text.partition(":")
  if not name:
    raise UserInputError(f"--variant={text!r} has no name; write NAME[:KEY=VALUE,...]")
  overrides, prng, options = {}, "threefry2x32", {}
  for setting in filter(None, settings.split(",")):
    key, sep, value = setting.partition("=")
    if not sep or not key:
      raise UserInputError(f"--variant={text!r}: {setting!r} is not KEY=VALUE")
    if key == "prng":
      if value not in _PRNG_IMPLS:
        raise UserInputError(f"--variant={text!r}: prng={value!r}; use one of {_PRNG_IMPLS}")
      prng = value
    elif key.startswith("xla."):
      options[key[len("xla.") :]] = value
    else:
      overrides[key] = value
  return Variant(name, overrides, prng, options)


def _with_overrides(config, overrides):
  """A copy of ``config`` with dotted-key string overrides, typed like the values they replace."""
  config = config.copy_and_resolve_references()
  with config.unlocked():
    for key, text in overrides.items():
      *path, leaf = key.split(".")
      node = config
      for part in path:
        if part not in node:
          raise UserInputError(f"--variant override {key!r}: the config has no key {part!r}")
        node = node[part]
      if leaf not in node:
        raise UserInputError(f"--variant override {key!r}: the config has no key {leaf!r}")
      old = node[leaf]
      if isinstance(old, bool):
        value = text.lower() in ("1", "true", "yes")
      elif old is None or isinstance(old, str):
        value = text
      else:
        value = type(old)(float(text)) if isinstance(old, int) else type(old)(text)
      node[leaf] = value
  return config


def _compiler_value(text: str):
  """An XLA option's value: a bool or int where it reads as one, else the string."""
  if text.lower() in ("true", "false"):
    return text.lower() == "true"
  try:
    return int(text)
  except ValueError:
    return text


def _progress(message):
  print(f"[benchmark_variants {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclasses.dataclass
class _Built:
  """One variant's step, lowered, with its own state, batch and key."""

  variant: Variant
  settings: object
  inputs: object  # setup.RandomStepInputs
  lowered: object
  compiled: object = None
  compile_s: float = 0.0

  def runner(self):
    """A `step_timing.Runner` of this variant's update; the state carries over between calls."""
    return step_timing.jax_runner(
      self.compiled, self.inputs.state, self.inputs.batch, self.inputs.rng
    )


def _build(variants, all_settings, mesh):
  """Each variant's training pieces, initial state, batch and dropout key, and its lowered step."""
  from bert_jax.train import setup  # pylint: disable=g-import-not-at-top

  built = []
  for variant, settings in zip(variants, all_settings):
    training = setup.build_training(settings, mesh)
    inputs = setup.random_step_inputs(
      training, mesh, settings.trainer.global_batch_size, key_impl=variant.prng
    )
    lowered = training.train_step.lower(inputs.state, inputs.batch, inputs.rng)
    _progress(f"{variant.name}: built and lowered")
    built.append(_Built(variant, settings, inputs, lowered))
  return built


def _compile(built, budget_s):
  """Compiles the variants one at a time (later ones reuse the first's GEMM autotuning); those
  that fail, or would start after ``budget_s``, are left out with a line on stderr."""
  deadline = time.monotonic() + budget_s
  for index, item in enumerate(built):
    if index and time.monotonic() > deadline:
      _progress(f"{item.variant.name}: skipped, --compile_budget_s spent")
      continue
    start = time.perf_counter()
    options = {k: _compiler_value(v) for k, v in item.variant.compiler_options.items()}
    try:
      item.compiled = item.lowered.compile(compiler_options=options or None)
    except Exception as error:  # pylint: disable=broad-except
      # One variant's unknown XLA option must not cost the others' measurements.
      _progress(f"{item.variant.name}: did not compile: {str(error)[:500]}")
      continue
    item.compile_s = time.perf_counter() - start
    _progress(f"{item.variant.name}: compiled in {item.compile_s:.1f} s")
  if built[0].compiled is None:
    raise UserInputError(f"the first variant, {built[0].variant.name!r}, did not compile")
  return [item for item in built if item.compiled is not None]


def _result(item, timings, first_name, device_kind):
  """The JSON line of one variant."""
  from bert_jax.train import flops  # pylint: disable=g-import-not-at-top

  settings = item.settings
  batch_size, seq_len = settings.trainer.global_batch_size, settings.data.max_seq_length
  step_flops = flops.train_flops_per_step(
    settings.model, batch_size, seq_len, settings.data.max_predictions_per_seq
  )
  peak = flops.total_peak_flops(settings.trainer.peak_flops_per_device)
  timed, first = timings[item.variant.name], timings[first_name]
  median, in_flight = timed.waited_median_s, timed.in_flight_median_s
  result = {
    "variant": item.variant.name,
    "overrides": item.variant.overrides,
    "prng": item.variant.prng,
    "compiler_options": item.variant.compiler_options,
    "device_kind": device_kind,
    "batch": batch_size,
    "seq_len": seq_len,
    "median_step_s": round(median, 5),
    "tokens_per_s": round(batch_size * seq_len / median, 1),
    "mfu": round(step_flops / median / peak, 4),
    "in_flight_step_s": round(in_flight, 5),
    "in_flight_mfu": round(step_flops / in_flight / peak, 4),
    "compile_s": round(item.compile_s, 1),
    "speedup_vs_first": round(first.waited_median_s / median, 3),
    "in_flight_speedup_vs_first": round(first.in_flight_median_s / in_flight, 3),
  }
  if "hf_torch" in timings:
    hf = timings["hf_torch"]
    result["hf_torch_median_step_s"] = round(hf.waited_median_s, 5)
    result["speedup_vs_hf_torch"] = round(hf.waited_median_s / median, 3)
    result["hf_torch_in_flight_step_s"] = round(hf.in_flight_median_s, 5)
    result["in_flight_speedup_vs_hf_torch"] = round(hf.in_flight_median_s / in_flight, 3)
  return result


def main(argv):
  del argv
  environment.quiet_tensorflow()
  if _BASELINE.value == "hf_torch":
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # PyTorch shares the GPU.
  variants = [parse_variant(text) for text in _VARIANTS.value]
  names = [variant.name for variant in variants]
  if len(set(names)) != len(names):
    raise UserInputError(f"--variant names repeat ({names}); give each its own name")
  import jax  # pylint: disable=g-import-not-at-top

  from bert_jax.bench import (
    hf_torch_baseline,  # pylint: disable=g-import-not-at-top
    trace_ops,  # pylint: disable=g-import-not-at-top
  )
  from bert_jax.parallel import mesh as mesh_lib  # pylint: disable=g-import-not-at-top
  from bert_jax.train import setup  # pylint: disable=g-import-not-at-top
  from bert_jax.train.settings import settings_from_config  # pylint: disable=g-import-not-at-top

  all_settings = [
    settings_from_config(_with_overrides(_CONFIG.value, variant.overrides)) for variant in variants
  ]
  first = all_settings[0]
  if _BASELINE.value == "hf_torch":
    hf_torch_baseline.check_config(first.model)
    hf_torch_baseline.import_torch()
  mesh = mesh_lib.make_mesh(first.mesh)
  with setup.mesh_context(mesh, first.mesh.logical_axis_rules):
    built = _compile(_build(variants, all_settings, mesh), _COMPILE_BUDGET.value)
    if _HLO_DIR.value:
      pathlib.Path(_HLO_DIR.value).mkdir(parents=True, exist_ok=True)
      for item in built:
        path = pathlib.Path(_HLO_DIR.value) / f"{item.variant.name}.hlo.txt.gz"
        with gzip.open(path, "wt") as f:
          f.write(item.compiled.as_text())
    runners = {item.variant.name: item.runner() for item in built}
    if _BASELINE.value == "hf_torch":
      runners["hf_torch"] = hf_torch_baseline.train_step(
        first.model,
        first.optimizer,
        built[0].inputs.host_batch,
        compile_model=False,
      ).runner
    timings = step_timing.alternate(runners, _STEPS.value, _ROUNDS.value)
    for item in built:
      result = _result(item, timings, built[0].variant.name, jax.devices()[0].device_kind)
      print(json.dumps(result), flush=True)
    if _PROFILE_DIR.value:
      _progress("profiling")
      for item in built:
        trace = trace_ops.trace_steps(
          runners[item.variant.name].run_one,
          _PROFILE_STEPS.value,
          pathlib.Path(_PROFILE_DIR.value) / item.variant.name,
        )
        rows = trace_ops.table_rows(
          trace_ops.op_times(trace), _PROFILE_STEPS.value, _PROFILE_TOP.value
        )
        for row in rows:
          print(json.dumps({"variant": item.variant.name, **row}), flush=True)


if __name__ == "__main__":
  raise SystemExit(runner.run_absl(main))
