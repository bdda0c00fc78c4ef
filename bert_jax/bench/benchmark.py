"""Train-step speed of a config on this host: one JSON line.

  python -m bert_jax.bench.benchmark --config=configs/bert_base.py \
      --config.global_batch_size=8 --steps=10 --baseline=hf_flax

A ``task=distillation`` config times the whole distillation step: the frozen teacher's forward
pass plus the student's update (MFU counts the student's FLOPs only).

``--profile_dir`` traces a few more of bert_jax's steps after the timing
(`bench/profile_table` sums their device time per HLO op).

Prints median step time, tokens/s, MFU and parameter count; with ``--baseline=hf_flax`` also
Hugging Face's FlaxBertForPreTraining (FlaxAlbertForPreTraining for ALBERT,
FlaxDistilBertForMaskedLM for DistilBERT, FlaxElectraForMaskedLM + FlaxElectraForPreTraining
for ELECTRA) trained the same way, measured in the same process in
alternating rounds so both see the same machine load, and the ratio of the medians.
``--baseline=hf_torch`` times Hugging Face's PyTorch BertForPreTraining instead (BERT only;
SDPA attention, fused AdamW and bf16 autocast on CUDA, float32 on CPU; ``--torch_compile``
wraps it in ``torch.compile``; see `hf_torch_baseline`), on CUDA when torch sees a GPU.
``median_step_cpu_s`` (and ``speedup_vs_hf_flax_cpu``) are the same for the process's CPU time
(all threads, user + system) per step, which other jobs on a shared machine inflate far less
than the wall time; a baseline on a GPU gets no CPU-time ratio (its host only waits).
Each implementation is timed twice (`step_timing`): each step waited for (``median_step_s``),
and steps kept in flight as the trainer runs them (``in_flight_step_s``, with
``in_flight_speedup_vs_<baseline>``), where the host's dispatch overlaps the device's work.
"""

import json
import os

from absl import flags
from ml_collections import config_flags

from bert_jax import environment
from bert_jax.bench import step_timing
from bert_jax.cli import runner
from bert_jax.errors import UserInputError

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file.", lock_config=True)
_STEPS = flags.DEFINE_integer("steps", 10, "Timed steps per implementation (after warmup).")
_ROUNDS = flags.DEFINE_integer("rounds", 5, "Alternating rounds the timed steps are split into.")
_BASELINE = flags.DEFINE_enum(
  "baseline", "none", ["none", "hf_flax", "hf_torch"], "Also time a baseline."
)
_TORCH_COMPILE = flags.DEFINE_bool(
  "torch_compile", False, "--baseline=hf_torch: run the PyTorch model through torch.compile."
)
_PROFILE_DIR = flags.DEFINE_string(
  "profile_dir",
  None,
  "After timing, trace bert_jax's step with jax.profiler into this folder (read it with "
  "bench/profile_table).",
)
_PROFILE_STEPS = flags.DEFINE_integer("profile_steps", 3, "--profile_dir: steps traced.")


def _hf_flax_runner(settings, training, host_batch):
  """A `step_timing.Runner` of Hugging Face's Flax model (`hf_flax_baseline`)."""
  import jax  # pylint: disable=g-import-not-at-top

  from bert_jax.bench import hf_flax_baseline  # pylint: disable=g-import-not-at-top

  hf_step, hf_state = hf_flax_baseline.train_step(settings.model, training.optimizer)
  holder = {"state": hf_state}

  def dispatch():
    params, opt_state, loss = hf_step(*holder["state"], host_batch, jax.random.key(1))
    holder["state"] = (params, opt_state)
    return loss

  return step_timing.Runner(dispatch, jax.block_until_ready)


def _check_baseline_flags():
  """Refuses --torch_compile without its baseline; readies jax to share a GPU with PyTorch."""
  if _TORCH_COMPILE.value and _BASELINE.value != "hf_torch":
    raise UserInputError("--torch_compile compiles the PyTorch baseline; add --baseline=hf_torch")
  if _BASELINE.value == "hf_torch":
    # PyTorch shares the GPU with jax in this process; jax would take 75% of it at start.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def _check_baseline_fits(settings):
  """Refuses a baseline the config cannot be compared with, before minutes of compiling."""
  from bert_jax.bench import (  # pylint: disable=g-import-not-at-top
    hf_flax_baseline,
    hf_torch_baseline,
  )

  if _BASELINE.value != "none" and settings.trainer.task != "pretraining":
    raise UserInputError(
      f"--baseline={_BASELINE.value} times Hugging Face's pretraining step; pass "
      "--config.task=pretraining to compare the family's step with it"
    )
  if _BASELINE.value == "hf_flax":  # Refuse before minutes of compiling.
    hf_flax_baseline.check_config(settings.model)
  if _BASELINE.value == "hf_torch":  # Refuse before minutes of compiling.
    hf_torch_baseline.check_config(settings.model)
    hf_torch_baseline.import_torch()


def _baseline_runner(settings, training, host_batch):
  """The --baseline's name, its `step_timing.Runner` and the extra result fields it adds."""
  from bert_jax.bench import hf_torch_baseline  # pylint: disable=g-import-not-at-top

  if _BASELINE.value == "hf_flax":
    return "hf_flax", _hf_flax_runner(settings, training, host_batch), {}
  torch_baseline = hf_torch_baseline.train_step(
    settings.model, settings.optimizer, host_batch, compile_model=_TORCH_COMPILE.value
  )
  extra = {
    "hf_torch_device": torch_baseline.device,
    "hf_torch_compute_dtype": torch_baseline.compute_dtype,
    "hf_torch_compile": _TORCH_COMPILE.value,
    "hf_torch_params": torch_baseline.params,
    "hf_torch_versions": torch_baseline.versions,
  }
  return "hf_torch", torch_baseline.runner, extra


def _time_steps(settings):
  """Builds the training step on the mesh and times it (and any baseline) in alternation.

  Args:
    settings: The run's `Settings`.

  Returns:
    bert_jax's train state, the `step_timing` timings by implementation name, and the
    baseline's extra result fields.
  """
  import jax  # pylint: disable=g-import-not-at-top

  from bert_jax.bench import trace_ops  # pylint: disable=g-import-not-at-top
  from bert_jax.parallel import mesh as mesh_lib  # pylint: disable=g-import-not-at-top
  from bert_jax.train import setup  # pylint: disable=g-import-not-at-top
  from bert_jax.train.settings import (  # pylint: disable=g-import-not-at-top
    check_batch_fits_mesh,
  )

  batch_size = settings.trainer.global_batch_size
  mesh = mesh_lib.make_mesh(settings.mesh)
  check_batch_fits_mesh(
    settings.trainer, mesh.shape["data"] * mesh.shape["fsdp"], jax.process_count()
  )
  with setup.mesh_context(mesh, settings.mesh.logical_axis_rules):
    training = setup.build_training(settings, mesh)
    inputs = setup.random_step_inputs(training, mesh, batch_size)
    state, host_batch, batch, rng = inputs.state, inputs.host_batch, inputs.batch, inputs.rng
    ours = step_timing.jax_runner(training.train_step, state, batch, rng)
    runners, extra = {"bert_jax": ours}, {}
    if _BASELINE.value != "none":
      name, runners[name], extra = _baseline_runner(settings, training, host_batch)
    timings = step_timing.alternate(runners, _STEPS.value, _ROUNDS.value)  # Compiles first.
    if _PROFILE_DIR.value:  # After the timing, so tracing costs it nothing.
      trace_ops.trace_steps(ours.run_one, _PROFILE_STEPS.value, _PROFILE_DIR.value)
  return state, timings, extra


def _our_result(settings, state, ours_timed):
  """bert_jax's fields of the result line: the setup, step times, tokens/s and MFU."""
  import jax  # pylint: disable=g-import-not-at-top

  from bert_jax.train import flops  # pylint: disable=g-import-not-at-top

  batch_size = settings.trainer.global_batch_size
  seq_len = settings.data.max_seq_length
  step_flops = flops.train_flops_per_step(
    settings.model, batch_size, seq_len, settings.data.max_predictions_per_seq
  )
  peak = flops.total_peak_flops(settings.trainer.peak_flops_per_device)
  median, in_flight = ours_timed.waited_median_s, ours_timed.in_flight_median_s
  return {
    "config": _CONFIG.value.model.size,
    "task": settings.trainer.task,  # distillation: the step includes the teacher's forward.
    "family": settings.model.family,
    "batch": batch_size,
    "seq_len": seq_len,
    "dtype": settings.model.dtype,
    "attention": settings.model.attention_kind,
    "devices": jax.device_count(),
    "device_kind": jax.devices()[0].device_kind,
    "params": sum(x.size for x in jax.tree.leaves(state.params)),
    "median_step_s": round(median, 4),
    "median_step_cpu_s": round(ours_timed.waited_median_cpu_s, 4),
    "tokens_per_s": round(batch_size * seq_len / median, 1),
    "mfu": round(step_flops / median / peak, 4),
    "in_flight_step_s": round(in_flight, 4),
    "in_flight_tokens_per_s": round(batch_size * seq_len / in_flight, 1),
    "in_flight_mfu": round(step_flops / in_flight / peak, 4),
    "peak_flops": peak,
    "steps_timed": len(ours_timed.waited),
  }


def _baseline_result(name, timed, ours_timed, tokens_per_step, on_cpu):
  """A baseline's fields of the result line: its times and bert_jax's speedup over it."""
  median, in_flight = ours_timed.waited_median_s, ours_timed.in_flight_median_s
  hf_median, hf_in_flight = timed.waited_median_s, timed.in_flight_median_s
  result = {
    f"{name}_median_step_s": round(hf_median, 4),
    f"{name}_tokens_per_s": round(tokens_per_step / hf_median, 1),
    f"speedup_vs_{name}": round(hf_median / median, 3),
    f"{name}_in_flight_step_s": round(hf_in_flight, 4),
    f"in_flight_speedup_vs_{name}": round(hf_in_flight / in_flight, 3),
  }
  if on_cpu:  # A GPU baseline's host CPU only waits.
    hf_median_cpu = timed.waited_median_cpu_s
    result.update(
      {
        f"{name}_median_step_cpu_s": round(hf_median_cpu, 4),
        f"speedup_vs_{name}_cpu": round(hf_median_cpu / ours_timed.waited_median_cpu_s, 3),
      }
    )
  return result


def main(argv):
  """Times the config's train step (and any --baseline's) and prints one JSON line.

  Args:
    argv: Leftover command-line arguments (unused).
  """
  del argv
  environment.quiet_tensorflow()
  _check_baseline_flags()  # Before jax is imported: it may set jax's GPU preallocation.
  from bert_jax.train.settings import (  # pylint: disable=g-import-not-at-top
    settings_from_config,
  )

  settings = settings_from_config(_CONFIG.value)
  _check_baseline_fits(settings)
  state, timings, extra = _time_steps(settings)
  ours_timed = timings["bert_jax"]
  result = _our_result(settings, state, ours_timed)
  result.update(extra)
  tokens_per_step = settings.trainer.global_batch_size * settings.data.max_seq_length
  on_cpu = extra.get("hf_torch_device", "cpu") == "cpu"
  for name in set(timings) - {"bert_jax"}:
    result.update(_baseline_result(name, timings[name], ours_timed, tokens_per_step, on_cpu))
  print(json.dumps(result), flush=True)


if __name__ == "__main__":
  raise SystemExit(runner.run_absl(main))
