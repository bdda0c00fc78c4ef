"""What a compiled step's entry computation holds: its kernels, and on TPU the compiler's own
time estimate of them, whole and per source op.

libtpu writes an ``estimated_cycles`` figure into the backend config of each instruction it
schedules in a program's entry computation: its cost model of that op (a fusion, a convert, a
copy) on one TensorCore, memory traffic and matrix units included. The instructions run one
after the other, so their sum is the step's op time as the compiler sees it. Collectives and
the asynchronous copies the compiler overlaps with compute carry no estimate and are not in it;
neither is anything inside a loop (counted where `aot_step` unrolls the step), nor a Pallas
kernel: libtpu gives those no cycles, so their own cost estimates are read instead
(`kernel_cost_estimates`).

Grouping the instructions by the jax operation they came from (their ``op_name`` with layer
numbers folded) gives a profile table of a TPU step compiled on a host without a TPU.
"""

import collections
import math
import re

_ENTRY = re.compile(r"^ENTRY [^\n]*\{\n(.*?)\n\}", re.S | re.M)
_CYCLES = re.compile(r'"estimated_cycles":"(\d+)"')
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = .*? ([a-z][\w\-]*)\(")
_STEP_PREFIX = re.compile(r"^jit\([^)]*\)/")
_NUMBERS = re.compile(r"_\d+\b")
_KERNEL_ESTIMATE = re.compile(
  r'"cost_estimate":\{"flops":"(?P<flops>\d+)".*?"bytes_accessed":"(?P<bytes>\d+)"'
)


def entry_lines(hlo_text: str) -> list:
  """The instruction lines of the program's entry computation (what runs as kernels and what
  reaches memory; fused computations are not in it)."""
  match = _ENTRY.search(hlo_text)
  return match.group(1).splitlines() if match else []


def estimated_cycles(hlo_text: str) -> int:
  """Sum of the entry computation's per-instruction ``estimated_cycles`` (0 when none has one,
  e.g. a program not compiled by libtpu)."""
  return sum(int(m.group(1)) for line in entry_lines(hlo_text) for m in _CYCLES.finditer(line))


def kernel_cost_estimates(hlo_text: str) -> tuple:
  """(FLOPs, bytes) that the entry computation's Mosaic kernels without estimated cycles say
  they cost (their ``pl.CostEstimate``); kernels without one add nothing."""
  flops = bytes_accessed = 0
  for line in entry_lines(hlo_text):
    if 'custom_call_target="tpu_custom_call"' in line and not _CYCLES.search(line):
      estimate = _KERNEL_ESTIMATE.search(line)
      if estimate:
        flops += int(estimate.group("flops"))
        bytes_accessed += int(estimate.group("bytes"))
  return flops, bytes_accessed


_DEFINITION = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = \(?(\w+)\[([\d,]*)\]")
_CUBLAS_CALL = re.compile(r'custom-call\(([^)]*)\), custom_call_target="__cublas\$')
_LHS_CONTRACTING = re.compile(r'"lhs_contracting_dimensions":\[([^\]]*)\]')
_BYTES_PER_ELEMENT = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2}
_BYTES_PER_ELEMENT.update({"s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8})


def cublas_gemm_cost(hlo_text: str) -> tuple:
  """(FLOPs, bytes) of a GPU program's cuBLAS GEMM calls: 2 x output elements x contracted size
  each, and its operands read and result written once.

  XLA's cost analysis counts them on a GPU (its GPU analysis knows the calls); run by a CPU
  client on a GPU program compiled without a GPU (`aot_step`), it sees opaque custom calls.
  """
  shapes = {}  # Instruction name -> (element type, dimensions) of its (first) array.
  flops = bytes_accessed = 0
  # One pass: HLO defines an instruction's operands on lines before it.
  for line in hlo_text.splitlines():
    definition = _DEFINITION.match(line)
    if not definition:
      continue
    dims = tuple(int(d) for d in definition.group(3).split(",") if d)
    shapes[definition.group(1)] = result = (definition.group(2), dims)
    call = _CUBLAS_CALL.search(line)
    if not call:
      continue
    # The result is the product (the call's workspace, its second output, is not counted).
    operands = [shapes[name.strip().lstrip("%")] for name in call.group(1).split(",")]
    contracting = _LHS_CONTRACTING.search(line).group(1).replace('"', "")
    contracted = math.prod(operands[0][1][int(d)] for d in contracting.split(",") if d)
    flops += 2 * math.prod(result[1]) * contracted
    for kind, dims in (*operands, result):
      bytes_accessed += math.prod(dims) * _BYTES_PER_ELEMENT.get(kind, 4)
  return flops, bytes_accessed


def kernel_count(hlo_text: str) -> int:
  """Instructions of the entry computation that launch device code: fusions and custom calls
  (a GEMM library call, a Pallas kernel). Ops XLA left unfused (a copy, a convert) and
  collectives are not counted."""
  count = 0
  for line in entry_lines(hlo_text):
    instruction = _INSTRUCTION.match(line)
    count += bool(instruction) and instruction.group(2) in ("fusion", "custom-call")
  return count


def source_op(line: str) -> str:
  """The jax operation an HLO instruction came from: its ``op_name`` without the jitted
  function's name and with layer numbers folded (``layer_3`` -> ``layer_#``); the HLO opcode
  when it has none."""
  name = _OP_NAME.search(line)
  if name is None:
    instruction = _INSTRUCTION.match(line)
    return instruction.group(2) if instruction else "?"
  return _NUMBERS.sub("_#", _STEP_PREFIX.sub("", name.group(1)))


def op_groups(hlo_text: str, clock_hz: float, top: int) -> list:
  """The ``top`` source ops with the most estimated time, largest first.

  Args:
    hlo_text: a compiled TPU program's HLO (``compiled.as_text()``).
    clock_hz: the TensorCore clock, to turn cycles into time.
    top: rows to return.

  Returns:
    Dicts with the source op, its estimated milliseconds, its share of the total and the
    number of instructions it compiled to.
  """
  cycles, count = collections.Counter(), collections.Counter()
  for line in entry_lines(hlo_text):
    estimate = _CYCLES.search(line)
    if estimate:
      op = source_op(line)
      cycles[op] += int(estimate.group(1))
      count[op] += 1
  total = sum(cycles.values()) or 1
  return [
    {
      "op": op,
      "ms": round(value / clock_hz * 1e3, 3),
      "share": round(value / total, 4),
      "instructions": count[op],
    }
    for op, value in cycles.most_common(top)
  ]
