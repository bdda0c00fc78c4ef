"""Where a profiled step's device time goes: per-HLO-op totals from a `jax.profiler` trace.

  python -m bert_jax.bench.profile_table --trace_dir=/tmp/trace --steps=3 --top=30

Reads the newest ``*.xplane.pb`` under ``--trace_dir`` (what `jax.profiler.trace` writes, e.g.
`bench/benchmark --profile_dir`) and prints one JSON line per HLO op, largest first: the op's
device milliseconds per step, its share of the device total, its launches per step and the
kernels it ran. GPU and TPU traces count the device planes' kernel events; a CPU trace has no
device plane, so its XLA thunks (host events carrying ``hlo_op``) are counted instead. No
TensorBoard or xprof is needed: jax reads the trace itself.
"""

import json

from absl import flags

from bert_jax.bench import trace_ops
from bert_jax.cli import runner
from bert_jax.errors import UserInputError

_TRACE_DIR = flags.DEFINE_string("trace_dir", None, "Folder a jax.profiler trace was written to.")
_STEPS = flags.DEFINE_integer("steps", 1, "Steps the trace holds; totals are divided by it.")
_TOP = flags.DEFINE_integer("top", 40, "HLO ops to print.")


def main(argv):
  del argv
  if not _TRACE_DIR.value:
    raise UserInputError("--trace_dir is required: the folder jax.profiler.trace wrote")
  if _STEPS.value < 1:
    raise UserInputError(f"--steps={_STEPS.value}: the number of steps traced, >= 1")
  for row in trace_ops.table_rows(
    trace_ops.op_times(trace_ops.newest_trace(_TRACE_DIR.value)), _STEPS.value, _TOP.value
  ):
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
  raise SystemExit(runner.run_absl(main))
