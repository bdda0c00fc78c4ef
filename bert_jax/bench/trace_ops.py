"""Per-HLO-op device time of a `jax.profiler` trace (read by `profile_table` and the benchmarks).

A GPU trace counts its streams' kernels (XLA's fusions and cuBLAS's GEMMs, by kernel name), a TPU
trace its device plane's ``XLA Ops`` line; a CPU trace has no device plane, so its XLA thunks
(host events carrying ``hlo_op``) are counted instead. jax reads the trace itself:
no TensorBoard or xprof is needed.
"""

import collections
import dataclasses
import pathlib

from bert_jax.errors import UserInputError

# Lines that XLA or the profiler derive from other lines' events (counting them would count a
# kernel twice); a TPU plane's "XLA Ops" line is the one to count there.
_DERIVED_LINES = ("XLA Modules", "XLA Ops", "Steps", "Framework", "Source code", "XLA TraceMe")


@dataclasses.dataclass
class OpTime:
  """Device time of one kernel or HLO op over the whole trace.

  Attributes:
    name: a GPU kernel's name (XLA names its fusions after the HLO: ``input_scatter_fusion_2``
      is ``input_scatter_fusion.2``; cuBLAS's are ``nvjet_*`` / ``cutlass_*``), a TPU or CPU
      trace's HLO op.
    ns: device nanoseconds, summed.
    launches: events counted.
    hlo_ops: the HLO ops (``hlo_op`` stat) its events ran under, with their nanoseconds: on a
      GPU, a CUDA graph's kernels all run under one ``command_buffer``.
  """

  name: str
  ns: float = 0.0
  launches: int = 0
  hlo_ops: collections.Counter = dataclasses.field(default_factory=collections.Counter)


def trace_steps(run_step, steps: int, trace_dir) -> pathlib.Path:
  """Runs ``run_step`` ``steps`` times under `jax.profiler.trace` into ``trace_dir``.

  Python frames are left out of the trace (they would be most of the file) and so is the HLO
  proto; device kernels and XLA's host events are in.

  Returns:
    The trace file written.
  """
  import jax  # pylint: disable=g-import-not-at-top

  options = jax.profiler.ProfileOptions()
  options.python_tracer_level = 0
  options.enable_hlo_proto = False
  with jax.profiler.trace(str(trace_dir), profiler_options=options):
    for _ in range(steps):
      run_step()
  return newest_trace(trace_dir)


def newest_trace(trace_dir) -> pathlib.Path:
  """The newest ``*.xplane.pb`` under ``trace_dir``.

  Raises:
    UserInputError: there is none.
  """
  traces = sorted(pathlib.Path(trace_dir).glob("**/*.xplane.pb"), key=lambda p: p.stat().st_mtime)
  if not traces:
    raise UserInputError(
      f"no *.xplane.pb under --trace_dir={trace_dir}; point it at a jax.profiler.trace folder"
    )
  return traces[-1]


def _counted_events(data):
  """(name, stats, nanoseconds) of the events that are device work, each counted once."""
  device_planes = [
    plane
    for plane in data.planes
    if plane.name.startswith(("/device:GPU", "/device:TPU")) and any(True for _ in plane.lines)
  ]
  for plane in device_planes:
    lines = list(plane.lines)
    op_lines = [line for line in lines if line.name == "XLA Ops"]
    for line in op_lines or [line for line in lines if not line.name.startswith(_DERIVED_LINES)]:
      for event in line.events:
        yield event.name, dict(event.stats), event.duration_ns
  if device_planes:
    return
  for plane in data.planes:  # A CPU trace: XLA's thunks carry the HLO op they run.
    for line in plane.lines:
      for event in line.events:
        stats = dict(event.stats)
        if "hlo_op" in stats:
          yield stats["hlo_op"], stats, event.duration_ns


def op_times(trace_path) -> list[OpTime]:
  """Device time per kernel (GPU) or HLO op (TPU, CPU) of a trace, largest first."""
  import jax  # pylint: disable=g-import-not-at-top

  ops: dict[str, OpTime] = {}
  for name, stats, duration_ns in _counted_events(
    jax.profiler.ProfileData.from_file(str(trace_path))
  ):
    op = ops.setdefault(name, OpTime(name))
    op.ns += duration_ns
    op.launches += 1
    op.hlo_ops[str(stats.get("hlo_op", ""))] += duration_ns
  return sorted(ops.values(), key=lambda op: -op.ns)


def table_rows(ops, steps: int, top: int) -> list[dict]:
  """JSON-ready rows of the ``top`` ops: per-step milliseconds, share, launches, HLO ops."""
  total = sum(op.ns for op in ops) or 1.0
  rows = []
  for op in ops[:top]:
    rows.append(
      {
        "op": op.name,
        "ms_per_step": round(op.ns / steps / 1e6, 4),
        "share": round(op.ns / total, 4),
        "launches_per_step": round(op.launches / steps, 2),
        "hlo_ops": [name for name, _ in op.hlo_ops.most_common(2) if name],
      }
    )
  rows.append(
    {"op": "TOTAL", "ms_per_step": round(total / steps / 1e6, 4), "share": 1.0, "ops": len(ops)}
  )
  return rows
