"""Compiles the real sharded train step for a Cloud TPU topology on any host, ahead of time.

  python -m bert_jax.tools.aot_compile --config=configs/bert_base.py --topology=v4-32 \
      --config.model.dtype=bfloat16 [--num_slices=2] [--config.<key>=<value> ...]

Needs the libtpu wheel (pip install -e '.[tpu]'), not a TPU: the step is traced with abstract
inputs carrying their shardings (no state is ever made) and compiled by libtpu for the
topology's devices. ``--topology=h100-1`` (or h200-8, ...) compiles for NVIDIA GPUs the same
way with jax's CUDA plugin (pip install -e '.[cuda]'; `bert_jax.parallel.gpu_topologies`).
Prints a readable summary on stderr and one JSON line on stdout: per-device memory (arguments,
temporaries, outputs) against the chip's HBM, compiled FLOPs per step against the model's
(bert_jax.train.flops), a roofline MFU ceiling, the kernel count and, on TPU, the compiler's
own estimate of the step's time (`compiled_ops`; ``--op_table=N`` breaks it down by jax op). A
step that does not fit is refused with one line and exit status 2, after its JSON line.

A distillation step (``task=distillation``) is compiled as it runs: one program of the teacher's
forward pass and the student's step, the teacher's parameters an argument with their
shardings. Their shapes come from the teacher's config.json, so ``distillation.teacher`` may be
a directory holding only that file (e.g. copied from the teacher's workdir); no weights are
read. Model FLOPs count the teacher's forward pass.

XLA's cost analysis counts the body of a loop once; `aot_step` says how a step with loops is
counted.
"""

import dataclasses
import json
import os
import sys
import time

from absl import flags
from ml_collections import config_flags

from bert_jax import environment
from bert_jax.cli import runner
from bert_jax.errors import UserInputError
from bert_jax.tools import aot_step, compiled_ops

_GIB = 2**30


@dataclasses.dataclass(frozen=True)
class AotResult:
  """What one ahead-of-time compile found; ``report`` is the JSON line."""

  report: dict
  compiled: object  # jax.stages.Compiled, or None when the compiler ran out of memory.
  mesh: object
  state_shardings: object
  chip: object  # topologies.Chip or gpu_topologies.Gpu.


def _memory(compiled) -> dict:
  stats = compiled.memory_analysis()
  memory = {
    "arguments": stats.argument_size_in_bytes,
    "temporaries": stats.temp_size_in_bytes,
    "outputs": stats.output_size_in_bytes,
    "aliased": stats.alias_size_in_bytes,
    "code": stats.generated_code_size_in_bytes,
  }
  # Donated state buffers are reused for the new state, so aliased bytes are counted once.
  memory["total"] = (
    memory["arguments"]
    + memory["outputs"]
    - memory["aliased"]
    + memory["temporaries"]
    + memory["code"]
  )
  return memory


def _roofline(
  peak_flops: float, hbm_bandwidth: float, cost: dict, model_flops_per_device: float
) -> dict:
  """Step time from peak FLOP/s and HBM bandwidth, communication ignored, and the MFU it allows.

  XLA's "bytes accessed" adds up the operands and results of every op, including traffic that
  stays in on-chip memory, so the memory time overstates HBM traffic; the compute-only ceiling
  (model over compiled FLOPs) is the bound that holds whatever the memory system does.
  """
  compute_s = cost["flops"] / peak_flops
  memory_s = cost["bytes_accessed"] / hbm_bandwidth
  step_s = max(compute_s, memory_s)
  return {
    "compute_s": compute_s,
    "memory_s": memory_s,
    "bound": "compute" if compute_s >= memory_s else "memory",
    "mfu_ceiling": model_flops_per_device / peak_flops / step_s,
    "compute_mfu_ceiling": model_flops_per_device / cost["flops"],
  }


def _compiler_estimate(chip, peak_flops: float, cost: dict, model_flops_per_device: float) -> dict:
  """The step's op time as libtpu's cost model estimates it, and the MFU that time gives.

  Unlike the roofline, the estimate prices each op on its own (a matmul at its matrix-unit
  efficiency, an elementwise fusion at its memory traffic); collectives and the copies the
  compiler overlaps with compute are not in it (`compiled_ops`). Pallas kernels, which libtpu
  does not price, are added at the roofline of their own cost estimates (``kernels_s``, a
  lower bound). None of the times where the chip's clock is unknown (GPUs).
  """
  cycles = cost["estimated_cycles"]
  if not chip.clock_hz or not cycles:
    return {"cycles": cycles, "kernels_s": None, "step_s": None, "mfu": None}
  kernels_s = max(cost["kernel_flops"] / peak_flops, cost["kernel_bytes"] / chip.hbm_bandwidth)
  step_s = cycles / chip.clock_hz + kernels_s
  return {
    "cycles": cycles,
    "kernels_s": kernels_s,
    "step_s": step_s,
    "mfu": model_flops_per_device / peak_flops / step_s,
  }


def _teacher_summary(task):
  """A distillation teacher's architecture for the report; None for other tasks."""
  if task.teacher is None:
    return None
  model = task.teacher.model
  return {
    "family": model.family,
    "layers": model.num_layers,
    "hidden": model.hidden_size,
    "heads": model.num_heads,
    "scan": model.scan_layers,
  }


def _topology_and_devices(name: str, num_slices: int):
  """(TPU slice or GPU topology called ``name``, its compile-only devices)."""
  from bert_jax.parallel import gpu_topologies, topologies  # pylint: disable=g-import-not-at-top

  if not gpu_topologies.is_gpu_topology(name):
    topology = topologies.get_topology(name)
    return topology, topologies.topology_devices(topology, num_slices)
  if num_slices != 1:
    raise UserInputError(
      f"--num_slices={num_slices} joins TPU slices; a GPU topology counts its GPUs in its "
      "name (e.g. h100-16 for two hosts of 8)"
    )
  topology = gpu_topologies.get_topology(name)
  return topology, gpu_topologies.topology_devices(topology)


def aot_compile(config, topology_name: str, num_slices: int = 1) -> AotResult:
  """Compiles the train step of ``config`` for ``num_slices`` slices of ``topology_name``.

  Args:
    config: the run's ConfigDict (as for `bert_jax.main`).
    topology_name: a key of `bert_jax.parallel.topologies.TOPOLOGIES`, e.g. "v4-32", or GPUs
      as `bert_jax.parallel.gpu_topologies` names them, e.g. "h100-8".
    num_slices: slices joined over the data-center network.

  Returns:
    The report (memory, FLOPs, roofline, fits) and the compiled step.

  Raises:
    UserInputError: unknown topology, no libtpu (or CUDA plugin), a mesh or batch that does
      not divide.
  """
  from bert_jax.parallel import mesh as mesh_lib  # pylint: disable=g-import-not-at-top
  from bert_jax.train import flops as flops_lib  # pylint: disable=g-import-not-at-top
  from bert_jax.train import settings as settings_lib  # pylint: disable=g-import-not-at-top

  topology, devices = _topology_and_devices(topology_name, num_slices)
  settings = settings_lib.settings_from_config(config)
  ici, dcn = mesh_lib.axis_sizes(settings.mesh, devices)
  mesh = mesh_lib.make_mesh(settings.mesh, devices)
  trainer, model = settings.trainer, settings.model
  settings_lib.check_batch_fits_mesh(
    trainer, mesh.shape["data"] * mesh.shape["fsdp"], len({d.process_index for d in devices})
  )
  start = time.perf_counter()
  compiled, oom, training = aot_step.compile_step(settings, mesh)
  compile_s = time.perf_counter() - start
  chip = topology.chip
  example = training.task.example_batch(trainer.global_batch_size)
  model_flops = flops_lib.train_flops_for_task(training.task, model, example) / len(devices)
  report = {
    "topology": topology.name,
    "num_slices": num_slices,
    "devices": len(devices),
    "device_kind": chip.device_kind,
    "model": {
      "layers": model.num_layers,
      "hidden": model.hidden_size,
      "heads": model.num_heads,
      "dtype": model.dtype,
      "attention": model.attention_kind,
      "remat": model.remat_policy,
      "scan": model.scan_layers,
    },
    "teacher": _teacher_summary(training.task),
    "global_batch_size": trainer.global_batch_size,
    "seq_len": example["input_ids"].shape[-1],
    "gradient_accumulation_steps": trainer.gradient_accumulation_steps,
    "mesh": dict(mesh.shape),
    "mesh_ici": dict(zip(mesh_lib.MESH_AXES, ici)),
    "mesh_dcn": dict(zip(mesh_lib.MESH_AXES, dcn)),
    "hbm_bytes": chip.hbm_bytes,
    "compile_s": round(compile_s, 1),
  }
  if compiled is None:
    report.update(fits=False, memory=None, out_of_memory=oom, model_flops=model_flops)
    return AotResult(report, None, mesh, training.state_shardings, chip)
  memory = _memory(compiled)
  cost = aot_step.step_cost(settings, mesh, compiled)
  peak_flops = flops_lib.device_kind_peak_flops(chip.device_kind)
  report.update(
    fits=memory["total"] <= chip.hbm_bytes,
    memory=memory,
    compiled_flops=cost["flops"],
    model_flops=model_flops,
    flops_ratio=cost["flops"] / model_flops,
    bytes_accessed=cost["bytes_accessed"],
    cost_source=cost["source"],
    flops_lower_bound=bool(cost["not_counted"]),
    flops_not_counted=cost["not_counted"],
    roofline=_roofline(peak_flops, chip.hbm_bandwidth, cost, model_flops),
    compiler_estimate=_compiler_estimate(chip, peak_flops, cost, model_flops),
    kernels=cost["kernels"],
  )
  return AotResult(report, compiled, mesh, training.state_shardings, chip)


def summary(report: dict) -> str:
  """The report as a few readable lines."""
  gib = lambda n: f"{n / _GIB:.2f} GiB"  # pylint: disable=unnecessary-lambda-assignment
  mesh = " ".join(f"{k}={v}" for k, v in report["mesh"].items())
  dcn = " ".join(f"{k}={v}" for k, v in report["mesh_dcn"].items() if v > 1)
  slices = f" x {report['num_slices']} slices" if report["num_slices"] > 1 else ""
  lines = [
    f"{report['topology']}{slices}: {report['devices']} x {report['device_kind']}; mesh {mesh}"
    + (f" (across slices: {dcn})" if dcn else "")
    + f"; batch {report['global_batch_size']} x seq {report['seq_len']}; compiled in "
    f"{report['compile_s']:.0f} s"
  ]
  teacher = report.get("teacher")
  if teacher:
    lines.append(
      f"  distillation: the step runs the {teacher['layers']}-layer, {teacher['hidden']}-wide "
      f"{teacher['family']} teacher forward first; its parameters are arguments"
    )
  memory = report["memory"]
  if memory is None:
    lines.append(f"  memory per device: does not fit ({report['out_of_memory']})")
    return "\n".join(lines)
  lines.append(
    f"  memory per device: arguments {gib(memory['arguments'])}, temporaries "
    f"{gib(memory['temporaries'])}, outputs {gib(memory['outputs'])} ({gib(memory['aliased'])} "
    f"aliased to arguments), code {gib(memory['code'])} -> total {gib(memory['total'])} of "
    f"{gib(report['hbm_bytes'])} HBM: {'fits' if report['fits'] else 'DOES NOT FIT'}"
  )
  bound = (
    f" (a lower bound: {report['flops_not_counted']}, so the MFU figures below are not bounds)"
    if report["flops_lower_bound"]
    else ""
  )
  lines.append(
    f"  FLOPs per device per step: compiled {report['compiled_flops']:.3e}{bound}, model "
    f"{report['model_flops']:.3e} (ratio {report['flops_ratio']:.2f}; {report['cost_source']})"
  )
  roofline = report["roofline"]
  lines.append(
    f"  roofline: compute {roofline['compute_s'] * 1e3:.1f} ms, memory "
    f"{roofline['memory_s'] * 1e3:.1f} ms per step (XLA bytes accessed at HBM bandwidth; "
    f"{roofline['bound']}-bound) -> MFU ceiling {roofline['mfu_ceiling']:.1%}; compute alone "
    f"{roofline['compute_mfu_ceiling']:.1%} (communication not counted)"
  )
  # A step with loops (scanned layers) launches its loop body's kernels once per iteration.
  loops = "" if report["cost_source"] == "compiled step" else " outside its loops"
  lines.append(f"  kernels: {report['kernels']} fusions and custom calls a step{loops}")
  estimate = report["compiler_estimate"]
  if estimate["step_s"]:
    lines.append(
      f"  compiler's estimate: {estimate['step_s'] * 1e3:.1f} ms of ops per step "
      f"({estimate['cycles']:.3e} cycles"
      + (
        f" + {estimate['kernels_s'] * 1e3:.1f} ms of Pallas kernels at their roofline"
        if estimate["kernels_s"]
        else ""
      )
      + f"; collectives and overlapped copies not counted) -> MFU {estimate['mfu']:.1%}"
    )
  return "\n".join(lines)


def op_table(result: AotResult, top: int) -> str:
  """The ``top`` jax ops with the most estimated time in the compiled step, one a line."""
  clock_hz = result.chip.clock_hz
  if not clock_hz or not result.report["compiler_estimate"]["cycles"]:
    return "  (no per-op time estimates: the compiler or the chip's clock gives none)"
  rows = compiled_ops.op_groups(result.compiled.as_text(), clock_hz, top)
  return "\n".join(
    f"  {row['ms']:8.3f} ms {row['share']:6.1%} x{row['instructions']:<4d} {row['op']}"
    for row in rows
  )


def refusal(report: dict) -> str:
  """One line saying why the step does not fit, with the sizes."""
  hbm = f"{report['hbm_bytes'] / _GIB:.2f} GiB HBM of a {report['device_kind']}"
  fixes = (
    "shard the state (mesh.fsdp), recompute activations (model.remat_policy), or "
    "accumulate gradients (gradient_accumulation_steps)"
  )
  if report["memory"] is None:
    return (
      f"the train step does not fit {report['topology']}: the compiler ran out of the "
      f"{hbm}: {report['out_of_memory']}; {fixes}"
    )
  memory = {k: f"{v / _GIB:.2f}" for k, v in report["memory"].items()}
  return (
    f"the train step does not fit {report['topology']}: {memory['total']} GiB per device "
    f"(arguments {memory['arguments']}, temporaries {memory['temporaries']}, outputs "
    f"{memory['outputs']} GiB) exceeds the {hbm}; {fixes}"
  )


def _define_flags(values: flags.FlagValues, argv):
  # sys_argv: the --config.<key> overrides are found in the arguments actually parsed.
  config_flags.DEFINE_config_file(
    "config",
    None,
    "Config file (configs/*.py).",
    flag_values=values,
    lock_config=True,
    sys_argv=argv,
  )
  flags.DEFINE_string(
    "topology",
    None,
    "Cloud TPU slice type, e.g. v4-32 or v5e-16, or NVIDIA GPUs, e.g. h100-1 or h200-8.",
    flag_values=values,
  )
  flags.DEFINE_integer("num_slices", 1, "Slices joined over DCN (multi-slice).", flag_values=values)
  flags.DEFINE_integer(
    "op_table",
    0,
    "Also print the N jax ops with the most of the TPU compiler's estimated time (stderr).",
    flag_values=values,
  )


def _run(values: flags.FlagValues, args):
  if values["config"].value is None or not values["topology"].value:
    raise UserInputError(
      "--config and --topology are required, e.g. --config=configs/bert_base.py --topology=v4-32"
    )
  result = aot_compile(values["config"].value, values["topology"].value, values["num_slices"].value)
  report = dict(result.report, argv=" ".join(args))
  print(summary(report), file=sys.stderr)
  if values["op_table"].value and result.compiled is not None:
    print(op_table(result, values["op_table"].value), file=sys.stderr)
  print(json.dumps(report), flush=True)
  if not report["fits"]:
    raise UserInputError(refusal(report))


def main(argv=None) -> int:
  """Runs the tool on ``argv`` (default ``sys.argv``); returns the exit status (2: refused)."""
  argv = sys.argv if argv is None else list(argv)
  # Ordinary computation stays on this host's CPU; libtpu only compiles.
  os.environ.setdefault("JAX_PLATFORMS", "cpu")
  environment.quiet_tensorflow()
  return runner.run(
    __doc__, lambda values: _define_flags(values, argv), lambda values: _run(values, argv[1:]), argv
  )


if __name__ == "__main__":
  raise SystemExit(main())
