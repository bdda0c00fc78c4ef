"""What `tools/aot_compile` compiles, and its cost counted through loops.

The step is the run's jitted train step traced with abstract arguments carrying their
shardings (`step_and_inputs`); for ``task=distillation`` it is the one program of the teacher's
forward pass and the student's step, the teacher's parameters abstract (their shapes from its
config.json).

XLA's cost analysis counts the body of a loop once. When the compiled step has loops (scanned
layers, gradient accumulation, the windowed einsums XLA makes for FSDP), its FLOPs and bytes
come from the same step compiled unrolled at 1 and 2 layers on one micro-batch with windowed
einsums off (a distillation teacher unrolled whole): per layer = the difference, times the
layers, times the micro-batches (exact for FLOPs; the optimizer update is counted once per
micro-batch, a negligible excess).
"""

import dataclasses
import re

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.tools import compiled_ops

# For the cost-only compiles: FSDP's all-gather / reduce-scatter matmuls without loops (TPU
# options; XLA's GPU compiler refuses them).
_NO_WINDOWED_EINSUM = {
  "xla_tpu_enable_windowed_einsum_for_all_gather": False,
  "xla_tpu_enable_windowed_einsum_for_reduce_scatter": False,
}


def abstract_batch(example, mesh):
  """ShapeDtypeStructs with batch shardings for ``example``'s arrays."""
  import jax  # pylint: disable=g-import-not-at-top

  from bert_jax.parallel import sharding  # pylint: disable=g-import-not-at-top

  return {
    k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=sharding.batch_sharding(mesh, v.ndim))
    for k, v in example.items()
  }


def step_and_inputs(training, settings, mesh, unscanned_teacher: bool):
  """(jitted train step, its abstract arguments with shardings): nothing is allocated.

  The arguments are (state, batch, rng), for distillation (state, batch, teacher params, rng)
  with the teacher's layers unscanned when ``unscanned_teacher`` (for the cost compiles).
  """
  import jax  # pylint: disable=g-import-not-at-top

  from bert_jax.parallel import sharding  # pylint: disable=g-import-not-at-top
  from bert_jax.train import teacher as teacher_lib  # pylint: disable=g-import-not-at-top

  batch_size = settings.trainer.global_batch_size
  key = jax.eval_shape(lambda: jax.random.key(0))
  rng = jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=sharding.replicated(mesh))
  task = training.task
  if settings.trainer.task != names.DISTILLATION:
    batch = abstract_batch(task.example_batch(batch_size), mesh)
    return training.train_step, (training.abstract_state, batch, rng)
  if unscanned_teacher:
    teacher = task.teacher
    model = dataclasses.replace(teacher.model, scan_layers=False)
    task = dataclasses.replace(task, teacher=dataclasses.replace(teacher, model=model))
    training = dataclasses.replace(training, task=task)
  teacher_params, teacher_shardings = teacher_lib.abstract_params(
    task, mesh, settings.mesh.logical_axis_rules
  )
  step, _ = teacher_lib.steps_with_teacher(training, teacher_shardings, mesh, batch_size)
  batch = abstract_batch(task.data_example_batch(batch_size), mesh)
  return step, (training.abstract_state, batch, teacher_params, rng)


def compile_step(settings, mesh, compiler_options=None, unscanned_teacher=False):
  """(compiled train step or None, compiler's out-of-memory line, training) for ``mesh``."""
  import jax  # pylint: disable=g-import-not-at-top

  from bert_jax.train import setup  # pylint: disable=g-import-not-at-top

  with setup.mesh_context(mesh, settings.mesh.logical_axis_rules):
    training = setup.build_training(settings, mesh, load_teacher=False)
    step, inputs = step_and_inputs(training, settings, mesh, unscanned_teacher)
    lowered = step.lower(*inputs)
  try:
    return lowered.compile(compiler_options=compiler_options), "", training
  except jax.errors.JaxRuntimeError as error:
    if "RESOURCE_EXHAUSTED" not in str(error):
      raise
    first_line = str(error).strip().splitlines()[0]
    return None, first_line.split("RESOURCE_EXHAUSTED:", 1)[-1].strip().rstrip("."), training


# What XLA's cost analysis leaves out of a program's FLOPs: it counts a loop's body once, and
# sees nothing inside a Pallas kernel unless it carries a cost estimate: on TPU (a
# ``tpu_custom_call``) splash attention's do not, flash attention's do; on GPU the Triton
# kernels (``__gpu$xla.gpu.triton``) are never counted.
LOOPS_COUNTED_ONCE = "loops counted once"
PALLAS_NOT_COUNTED = "Pallas kernels (splash attention) not counted"
TRITON_NOT_COUNTED = "Pallas Triton kernels (flash attention) not counted"


def _cost_analysis(compiled, text: str) -> dict:
  """XLA's cost analysis of the compiled program.

  A GPU program compiled without a GPU has none (its executable cannot analyse itself);
  XLA's analysis of its optimized HLO is then run by the host's CPU client, which counts
  the GPU program's own instructions, its cuBLAS GEMM calls as `compiled_ops` reads them from
  ``text``, the program's HLO.
  """
  analysis = compiled.cost_analysis()
  if isinstance(analysis, (list, tuple)):
    analysis = analysis[0]
  if analysis:
    return analysis
  import jax  # pylint: disable=g-import-not-at-top
  from jax._src.lib import _jax  # pylint: disable=g-import-not-at-top

  module = compiled.runtime_executable().hlo_modules()[0]
  analysis = dict(_jax.hlo_module_cost_analysis(jax.devices("cpu")[0].client, module))
  gemm_flops, gemm_bytes = compiled_ops.cublas_gemm_cost(text)
  analysis["flops"] = analysis.get("flops", 0.0) + gemm_flops
  analysis["bytes accessed"] = analysis.get("bytes accessed", 0.0) + gemm_bytes
  return analysis


def cost(compiled) -> dict:
  """Per device of one compiled program: its ``kernels`` (`compiled_ops.kernel_count`), XLA's
  ``flops`` and ``bytes_accessed``, the TPU compiler's ``estimated_cycles`` of its ops and what
  the Mosaic kernels it has no cycles for estimate themselves (``kernel_flops``,
  ``kernel_bytes``; `compiled_ops`), and ``missing``: what the FLOPs leave out, a tuple of the
  reasons above (empty when nothing)."""
  text = compiled.as_text()  # Once: the GPU fallback's cuBLAS count reads it too.
  analysis = _cost_analysis(compiled, text)
  missing = ()
  if re.search(r"\bwhile\(", text):
    missing += (LOOPS_COUNTED_ONCE,)
  # A Mosaic kernel is counted when it carries a cost estimate (the flash kernels do).
  if any(
    '"cost_estimate"' not in line
    for line in text.splitlines()
    if 'custom_call_target="tpu_custom_call"' in line
  ):
    missing += (PALLAS_NOT_COUNTED,)
  if 'custom_call_target="__gpu$xla.gpu.triton"' in text:
    missing += (TRITON_NOT_COUNTED,)
  kernel_flops, kernel_bytes = compiled_ops.kernel_cost_estimates(text)
  return {
    "kernels": compiled_ops.kernel_count(text),
    "flops": float(analysis["flops"]),
    "bytes_accessed": float(analysis["bytes accessed"]),
    "estimated_cycles": compiled_ops.estimated_cycles(text),
    "kernel_flops": kernel_flops,
    "kernel_bytes": kernel_bytes,
    "missing": missing,
  }


def unrolled(settings, num_layers: int):
  """The same step with ``num_layers`` unscanned layers on one micro-batch, no accumulation."""
  trainer = settings.trainer
  micro_batch = trainer.global_batch_size // trainer.gradient_accumulation_steps
  return dataclasses.replace(
    settings,
    model=dataclasses.replace(settings.model, num_layers=num_layers, scan_layers=False),
    trainer=dataclasses.replace(
      trainer, global_batch_size=micro_batch, gradient_accumulation_steps=1
    ),
  )


_EXTRAPOLATED = ("flops", "bytes_accessed", "estimated_cycles", "kernel_flops", "kernel_bytes")


def step_cost(settings, mesh, compiled) -> dict:
  """`cost`'s figures per device per step (``kernels`` the compiled step's own), where they came
  from (``source``), and what the FLOPs leave out (``not_counted``: "" when nothing, else the
  FLOPs are a lower bound)."""
  counted = cost(compiled)
  if LOOPS_COUNTED_ONCE not in counted["missing"]:
    return {
      **{key: counted[key] for key in _EXTRAPOLATED},
      "kernels": counted["kernels"],
      "source": "compiled step",
      "not_counted": "; ".join(counted["missing"]),
    }
  costs = []
  for num_layers in (1, 2):
    compiled_layers, oom, _ = compile_step(
      unrolled(settings, num_layers),
      mesh,
      _NO_WINDOWED_EINSUM if mesh.devices.flat[0].platform == "tpu" else None,
      unscanned_teacher=True,
    )
    if compiled_layers is None:
      raise UserInputError(
        f"the {num_layers}-layer step compiled for its cost ran out of memory: {oom}"
      )
    costs.append(cost(compiled_layers))
  layers = settings.model.num_layers
  accumulation = settings.trainer.gradient_accumulation_steps
  one, two = costs
  return {
    **{
      key: accumulation * (one[key] + (layers - 1) * (two[key] - one[key])) for key in _EXTRAPOLATED
    },
    # The step's own kernels, outside its loops: the loop bodies' run once per iteration.
    "kernels": counted["kernels"],
    "source": "unrolled 1- and 2-layer compiles, extrapolated",
    # Loops still there (e.g. in LSH attention) are counted once: FLOPs are a lower bound.
    "not_counted": "; ".join(dict.fromkeys(one["missing"] + two["missing"])),
  }
