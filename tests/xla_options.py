"""How the tests compile: without XLA's expensive optimisations, except where a test opts in.

Most test programs are compiled once and run for a few steps, so compiling them takes most of
their time; `jax_disable_most_optimizations` cuts that by about a third. Unoptimised CPU
programs also go through XLA:CPU's older loop emitters instead of its MLIR fusion emitters,
which compile a tiny model's train step 25-35% faster (3.9 -> 2.9 s for ELECTRA's) with the same
losses to 1e-7. A test that trains for hundreds of steps runs 1.2-1.8x slower unoptimised, so
it opts back in, and gets the fusion emitters back: the ``optimized_xla`` marker on a test, or
`optimized_xla()` around what a fixture trains. Only its train step is optimised: the rest of
what such a run compiles (the state's init, the eval and predict steps, the optimizer's init)
runs once or a few times, and compiles 2-8x faster without (ELECTRA's learning run: init 3.8 ->
2.1 CPU-s, eval step 3.9 -> 0.5).

One more option makes the unoptimised compiles cheaper in CPU time, which is what the suite
spends on a 2-core machine where both pytest workers keep both cores busy: the LLVM module is
compiled as one piece instead of 32. XLA:CPU splits it to compile the pieces in parallel, but
each piece builds its own target machine and intrinsics, and there is no idle core to run them
on. BERT-tiny's train step on 1 and on 8 devices took 5.1 CPU-s to compile in 32 pieces and
4.2 in one (median of 6, interleaved in one process). Optimised compiles keep the split: at
LLVM's full optimisation one piece costs more than 32 (15.1 against 13.3 CPU-s).
"""

import contextlib
import functools
import inspect

import jax
from jax._src import compiler as jax_compiler
from jax._src.lib.mlir import ir

# XLA:CPU debug options for unoptimised compiles; the subprocess runs get them as XLA_FLAGS
# (`as_xla_flags`, used by tests/run_helpers.py).
UNOPTIMIZED_CPU_OPTIONS = {
  "xla_cpu_use_fusion_emitters": False,
  "xla_cpu_parallel_codegen_split_count": 1,
}

# The programs a long run executes at every step: the trainer's step and the tests' own loops'.
TRAIN_STEPS = frozenset({"jit_train_step", "jit_step"})

# The programs `optimized_xla` optimises (None: every program), while one is active.
_optimized_programs = None


def as_xla_flags(options):
  """``{"name": value}`` as the XLA_FLAGS text ``--name=value`` (booleans lower-case)."""
  return " ".join(
    f"--{name}={str(value).lower() if isinstance(value, bool) else value}"
    for name, value in options.items()
  )


def disable_most_optimizations():
  """Makes unoptimised compilation the default for the rest of the process."""
  jax.config.update("jax_disable_most_optimizations", True)
  _compile_unoptimized_programs_with_options()


@contextlib.contextmanager
def optimized_xla(programs=TRAIN_STEPS):
  """Compiles with XLA's usual optimisations inside the block: the ``programs`` named (jitted
  function names as XLA sees them, ``jit_<name>``), or every program when None."""
  global _optimized_programs
  previous = jax.config.read("jax_disable_most_optimizations"), _optimized_programs
  jax.config.update("jax_disable_most_optimizations", False)
  _optimized_programs = programs
  try:
    yield
  finally:
    jax.config.update("jax_disable_most_optimizations", previous[0])
    _optimized_programs = previous[1]


def _unoptimized(name):
  """Whether the program ``name`` compiles unoptimised: everywhere outside `optimized_xla`, and
  inside it when the block does not name it."""
  if jax.config.read("jax_disable_most_optimizations"):
    return True
  return _optimized_programs is not None and name not in _optimized_programs


def _compile_unoptimized_programs_with_options():
  """Wraps jax's compile entry point (every jit compile goes through it, and it alone sees the
  program's name) so that an unoptimised CPU program gets jax's unoptimised debug options
  (those of `jax_disable_most_optimizations`) and `UNOPTIMIZED_CPU_OPTIONS`; a jit's own
  options still win. The options are changed before jax keys its compilation cache on them.

  jax has no public setting for process-wide compiler options (XLA_FLAGS would apply them to
  the optimised compiles too), hence the wrapper; its signature is checked so that a jax
  upgrade that reorders the arguments fails here instead of silently dropping the options.
  """
  compile_or_get_cached = jax_compiler.compile_or_get_cached
  leading = list(inspect.signature(compile_or_get_cached).parameters)[:4]
  if leading != ["backend", "computation", "devices", "compile_options"]:
    raise RuntimeError(
      "jax._src.compiler.compile_or_get_cached no longer starts with (backend, computation, "
      "devices, compile_options); update tests/xla_options.py for this jax version"
    )

  @functools.wraps(compile_or_get_cached)
  def compile_with_options(backend, computation, devices, compile_options, *args, **kwargs):
    name = ir.StringAttr(computation.operation.attributes["sym_name"]).value
    if backend.platform == "cpu" and _unoptimized(name):
      debug_options = compile_options.executable_build_options.debug_options
      debug_options.xla_backend_optimization_level = 0
      debug_options.xla_llvm_disable_expensive_passes = True
      compile_options.env_option_overrides = list(
        {**UNOPTIMIZED_CPU_OPTIONS, **dict(compile_options.env_option_overrides)}.items()
      )
    return compile_or_get_cached(backend, computation, devices, compile_options, *args, **kwargs)

  jax_compiler.compile_or_get_cached = compile_with_options
