"""The persistent XLA compilation cache: a restarted run loads its programs instead of compiling.

A pod job that restarts (preemption, a crash, a relaunch) would otherwise spend minutes
recompiling the train and eval steps it compiled before. jax keys each entry by the program,
the devices and the compiler version, so a cache shared by runs of different configs is safe.
"""

import jax
from absl import logging
from etils import epath
from jax.experimental.compilation_cache import compilation_cache as jax_compilation_cache


def configure(workdir: epath.Path, cache_dir: str, platform: str):
  """Points jax's persistent compilation cache at ``cache_dir`` (relative to ``workdir``).

  Call at the run's commit point (after config.json), before the train step compiles: a
  refused run writes nothing into the workdir. The cache is reopened (jax reads its settings
  at the next compile), so programs compiled earlier in this process do not pin another
  directory.

  Off GPU the cache also stops XLA's GPU autotuning cache from living inside it: jax passes
  that directory to the compiler by its absolute path, which then becomes part of every entry's
  key, so a workdir that was copied, moved or mounted elsewhere would compile everything again.
  On a GPU the autotuning results are worth more than that, and jax's default stays.

  Args:
    workdir: the run's workdir.
    cache_dir: absolute (local or ``gs://``) or relative to ``workdir``; "" leaves jax's own
      setting (``JAX_COMPILATION_CACHE_DIR``) alone.
    platform: the run's devices' platform ("cpu", "tpu", "gpu").
  """
  if not cache_dir:
    return
  path = epath.Path(cache_dir)
  if not ("://" in cache_dir or path.is_absolute()):
    path = workdir / cache_dir
  jax.config.update("jax_compilation_cache_dir", str(path))
  # Cache every program: on a pod even the small eval and init programs cost seconds each.
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  if platform != "gpu":
    jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
  jax_compilation_cache.reset_cache()
  logging.info("XLA compilation cache: %s", path)
