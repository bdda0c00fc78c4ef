"""How the tests compile: without XLA's expensive optimisations, except where a test opts in.

Most test programs are compiled once and run for a few steps, so compiling them takes most of
their time; `jax_disable_most_optimizations` cuts that by about a third. A test that trains for
hundreds of steps runs 1.2-1.8x slower that way, so it opts back in: the ``optimized_xla``
marker on a test, or `optimized_xla()` around what a fixture trains.
"""

import contextlib

import jax


def disable_most_optimizations():
  """Makes unoptimised compilation the default for the rest of the process."""
  jax.config.update("jax_disable_most_optimizations", True)


@contextlib.contextmanager
def optimized_xla():
  """Compiles with XLA's usual optimisations inside the block."""
  previous = jax.config.read("jax_disable_most_optimizations")
  jax.config.update("jax_disable_most_optimizations", False)
  try:
    yield
  finally:
    jax.config.update("jax_disable_most_optimizations", previous)
