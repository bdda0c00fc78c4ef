"""Test setup: 8 fake CPU devices and quiet TensorFlow, fixed before jax or TF is imported."""

import fcntl
import os

os.environ["XLA_FLAGS"] = (
  os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # pylint: disable=g-import-not-at-top

# Implicit rank promotion hides shape bugs; make it an error everywhere under test.
jax.config.update("jax_numpy_rank_promotion", "raise")

import pytest  # noqa: E402  (after the XLA flags and jax config above)
from jax.experimental.compilation_cache import compilation_cache  # noqa: E402

from tests import xla_options  # noqa: E402

xla_options.disable_most_optimizations()


def pytest_configure(config):
  config.addinivalue_line(
    "markers", "optimized_xla: compile with XLA's usual optimisations (long training runs)"
  )


@pytest.fixture(autouse=True)
def _xla_optimisations_where_marked(request):
  """Tests marked ``optimized_xla`` compile with XLA's optimisations (tests/xla_options.py)."""
  if request.node.get_closest_marker("optimized_xla") is None:
    yield
    return
  with xla_options.optimized_xla():
    yield


# Programs that take longer than this to compile go to the worker's cache (below); the many
# small helper programs would cost more to write than to compile again.
_CACHED_COMPILE_SECS = 1.0


@pytest.fixture(scope="session", autouse=True)
def _worker_compilation_cache(tmp_path_factory):
  """One persistent XLA compilation cache per test worker, so a program that several tests
  compile (the same tiny model's train step, a resumed run's) compiles once.

  Returns:
    The cache directory.
  """
  return tmp_path_factory.mktemp("xla_cache")


@pytest.fixture(autouse=True)
def _compilation_cache_back_to_the_workers(_worker_compilation_cache):
  """Points jax at the worker's cache before each test. An in-process run repoints jax's
  process-wide setting at its own workdir (bert_jax/train/compilation_cache.py); left there,
  every later test would write each program it compiles into that workdir."""
  jax.config.update("jax_compilation_cache_dir", str(_worker_compilation_cache))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", _CACHED_COMPILE_SECS)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  compilation_cache.reset_cache()


@pytest.fixture(scope="session")
def tiny_pretrained_workdir(tmp_path_factory, worker_id):
  """A pretraining workdir of a BERT-tiny-shaped model (see tests/finetune_fixtures.py),
  trained a few dozen steps once per session (the first xdist worker to need it trains it, the
  other waits and reads the same directory); fine-tuning tests pass it as ``init_from``
  together with `finetune_fixtures.model_overrides()` / `model_flags()`. Treat it as read-only.
  """
  from tests import finetune_fixtures  # pylint: disable=g-import-not-at-top

  root = tmp_path_factory.getbasetemp()
  if worker_id != "master":  # The workers' base directories share this session's parent.
    root = root.parent
  workdir, done = root / "tiny_pretrained", root / "tiny_pretrained.done"
  with open(root / "tiny_pretrained.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)  # Released when the file closes.
    if not done.exists():
      finetune_fixtures.pretrain_tiny(workdir)
      done.touch()
  return workdir
