"""Train-step speed of a config on this host: one JSON line.

  python -m bert_jax.tools.benchmark --config=configs/bert_base.py \
      --config.global_batch_size=8 --steps=10 --baseline=hf_flax

A ``task=distillation`` config times the whole distillation step: the frozen teacher's forward
pass plus the student's update (MFU counts the student's FLOPs only).

``--profile_dir`` traces a few more of bert_jax's steps after the timing
(`tools/profile_table` sums their device time per HLO op).

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
"""

import json
import os
import statistics
import time

from absl import flags
from ml_collections import config_flags

from bert_jax import environment
from bert_jax.errors import UserInputError
from bert_jax.tools import cli

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
  "tools/profile_table).",
)
_PROFILE_STEPS = flags.DEFINE_integer("profile_steps", 3, "--profile_dir: steps traced.")


def _timed(run_one, steps):
  """[(wall seconds, process CPU seconds)] of ``steps`` calls."""
  times = []
  for _ in range(steps):
    start, start_cpu = time.perf_counter(), time.process_time()
    run_one()
    times.append((time.perf_counter() - start, time.process_time() - start_cpu))
  return times


def _hf_flax_runner(settings, training, host_batch):
  """One update of Hugging Face's Flax model (`Family.hf_baseline`), run to completion."""
  import jax  # pylint: disable=g-import-not-at-top

  from bert_jax.models import families  # pylint: disable=g-import-not-at-top

  baseline = families.get(settings.model.family).hf_baseline
  hf_step, hf_state = baseline(settings.model, training.optimizer)
  holder = {"state": hf_state}

  def hf():
    params, opt_state, loss = hf_step(*holder["state"], host_batch, jax.random.key(1))
    holder["state"] = (params, opt_state)
    jax.block_until_ready(loss)

  return hf


def main(argv):
  del argv
  environment.quiet_tensorflow()
  if _TORCH_COMPILE.value and _BASELINE.value != "hf_torch":
    raise UserInputError("--torch_compile compiles the PyTorch baseline; add --baseline=hf_torch")
  if _BASELINE.value == "hf_torch":
    # PyTorch shares the GPU with jax in this process; jax would take 75% of it at start.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
  import jax  # pylint: disable=g-import-not-at-top

  from bert_jax.models import families  # pylint: disable=g-import-not-at-top
  from bert_jax.parallel import mesh as mesh_lib  # pylint: disable=g-import-not-at-top
  from bert_jax.tools import hf_torch_baseline, trace_ops  # pylint: disable=g-import-not-at-top
  from bert_jax.train import (
    flops,  # pylint: disable=g-import-not-at-top
    setup,  # pylint: disable=g-import-not-at-top
  )
  from bert_jax.train.settings import (  # pylint: disable=g-import-not-at-top
    check_batch_fits_mesh,
    settings_from_config,
  )

  settings = settings_from_config(_CONFIG.value)
  if _BASELINE.value != "none" and settings.trainer.task != "pretraining":
    raise UserInputError(
      f"--baseline={_BASELINE.value} times Hugging Face's pretraining step; pass "
      "--config.task=pretraining to compare the family's step with it"
    )
  if _BASELINE.value == "hf_flax" and families.get(settings.model.family).hf_baseline is None:
    raise UserInputError(
      f"--baseline=hf_flax: transformers has no Flax model of model.family="
      f"{settings.model.family!r}; drop --baseline"
    )
  if _BASELINE.value == "hf_torch":  # Refuse before minutes of compiling.
    hf_torch_baseline.check_config(settings.model)
    hf_torch_baseline.import_torch()
  batch_size = settings.trainer.global_batch_size
  mesh = mesh_lib.make_mesh(settings.mesh)
  check_batch_fits_mesh(
    settings.trainer, mesh.shape["data"] * mesh.shape["fsdp"], jax.process_count()
  )
  with setup.mesh_context(mesh, settings.mesh.logical_axis_rules):
    training = setup.build_training(settings, mesh)
    inputs = setup.random_step_inputs(training, mesh, batch_size)
    state, host_batch, batch, rng = inputs.state, inputs.host_batch, inputs.batch, inputs.rng
    holder = {"state": state}

    def ours():
      holder["state"], metrics = training.train_step(holder["state"], batch, rng)
      jax.block_until_ready(metrics)

    runners, extra = {"bert_jax": ours}, {}
    if _BASELINE.value == "hf_flax":
      runners["hf_flax"] = _hf_flax_runner(settings, training, host_batch)
    elif _BASELINE.value == "hf_torch":
      torch_baseline = hf_torch_baseline.train_step(
        settings.model, settings.optimizer, host_batch, compile_model=_TORCH_COMPILE.value
      )
      runners["hf_torch"] = torch_baseline.step
      extra = {
        "hf_torch_device": torch_baseline.device,
        "hf_torch_compute_dtype": torch_baseline.compute_dtype,
        "hf_torch_compile": _TORCH_COMPILE.value,
        "hf_torch_params": torch_baseline.params,
        "hf_torch_versions": torch_baseline.versions,
      }
    for run_one in runners.values():  # Compile and warm up.
      run_one()
      run_one()
    times = {name: [] for name in runners}
    per_round = max(_STEPS.value // _ROUNDS.value, 1)
    for _ in range(_ROUNDS.value):
      for name, run_one in runners.items():
        times[name] += _timed(run_one, per_round)
    if _PROFILE_DIR.value:  # After the timing, so tracing costs it nothing.
      trace_ops.trace_steps(ours, _PROFILE_STEPS.value, _PROFILE_DIR.value)

  seq_len = settings.data.max_seq_length
  step_flops = flops.train_flops_per_step(
    settings.model, batch_size, seq_len, settings.data.max_predictions_per_seq
  )
  peak = flops.total_peak_flops(settings.trainer.peak_flops_per_device)
  median = statistics.median(wall for wall, _ in times["bert_jax"])
  median_cpu = statistics.median(cpu for _, cpu in times["bert_jax"])
  result = {
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
    "median_step_cpu_s": round(median_cpu, 4),
    "tokens_per_s": round(batch_size * seq_len / median, 1),
    "mfu": round(step_flops / median / peak, 4),
    "peak_flops": peak,
    "steps_timed": len(times["bert_jax"]),
  }
  result.update(extra)
  for name in set(times) - {"bert_jax"}:
    hf_median = statistics.median(wall for wall, _ in times[name])
    result.update(
      {
        f"{name}_median_step_s": round(hf_median, 4),
        f"{name}_tokens_per_s": round(batch_size * seq_len / hf_median, 1),
        f"speedup_vs_{name}": round(hf_median / median, 3),
      }
    )
    if extra.get("hf_torch_device", "cpu") == "cpu":  # A GPU baseline's host CPU only waits.
      hf_median_cpu = statistics.median(cpu for _, cpu in times[name])
      result.update(
        {
          f"{name}_median_step_cpu_s": round(hf_median_cpu, 4),
          f"speedup_vs_{name}_cpu": round(hf_median_cpu / median_cpu, 3),
        }
      )
  print(json.dumps(result), flush=True)


if __name__ == "__main__":
  raise SystemExit(cli.run_absl(main))
