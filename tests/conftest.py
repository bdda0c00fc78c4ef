"""Test setup: 8 fake CPU devices and quiet TensorFlow, fixed before jax or TF is imported; no
network (a socket guard, tensorflow-datasets' GCS access off); GPU-only tests deselected
without a GPU."""

import fcntl
import gc
import os
import pathlib

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

from tests import allocator, file_order, network_guard, xla_options  # noqa: E402

xla_options.disable_most_optimizations()
allocator.keep_freed_memory()

# Tracing a model makes millions of short-lived objects; at Python's default thresholds the
# collector runs thousands of times a test file over a heap of every imported library, about
# 7% of a worker's time. Rarer collections free the same cycles a little later.
gc.set_threshold(50_000, 10, 10)


def pytest_addoption(parser):
  parser.addoption(
    "--record-file-durations",
    metavar="PATH",
    help="write each test file's summed duration to PATH (tests/file_durations.json sets the "
    "order in which the workers take the files; tests/file_order.py)",
  )


def pytest_configure(config):
  record_to = config.getoption("--record-file-durations", default=None)
  if record_to and not hasattr(config, "workerinput"):  # The controller sees every report.
    config.pluginmanager.register(file_order.DurationRecorder(record_to))
  if config.pluginmanager.hasplugin("xdist"):
    # xdist's --dist loadfile would queue the files with the most tests first; keep the
    # collection's order, the longest first (pytest_collection_modifyitems below). Set here
    # rather than in an ini file's addopts, which pytest refuses where xdist is not installed.
    config.option.loadscopereorder = False
  config.addinivalue_line(
    "markers", "optimized_xla: compile with XLA's usual optimisations (long training runs)"
  )
  config.addinivalue_line(
    "markers", "gpu: needs an NVIDIA GPU (JAX_PLATFORMS=cuda,cpu); deselected on other backends"
  )
  config.addinivalue_line("markers", "no_gpu: checks a refusal off GPU; deselected on a GPU")
  # transformers' TransfoXLLMHeadModel, the deprecated reference of the transformer_xl family,
  # warns on every construction that its output changes in v5; the tests read no such output.
  config.addinivalue_line(
    "filterwarnings", "ignore:The output of TransfoXL will be updated in v5:DeprecationWarning"
  )
  # six's meta-path importer (six.moves, imported by a dependency of the data tools) still
  # implements the load_module() that Python 3.12 removes; nothing of ours calls it.
  config.addinivalue_line(
    "filterwarnings", "ignore:the load_module\\(\\) method is deprecated:DeprecationWarning"
  )
  # Tests that run `main` in-process point jax's process-wide compilation cache at their
  # workdir, which pytest removes afterwards; a later compile in the same worker then cannot
  # write its cache entry there. The program still compiles and runs; only the write is lost.
  config.addinivalue_line(
    "filterwarnings", "ignore:Error writing persistent compilation cache entry:UserWarning"
  )


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
  """Moves every object left when the tests are done out of the collector's reach, before
  pytest's last collection (it looks for unraisable exceptions): a full pass over a worker's
  heap of compiled programs and imported libraries took seconds, at the end of the run."""
  del config
  gc.freeze()


def pytest_collection_modifyitems(config, items):
  """Deselects the tests that cannot run on this backend, so that a CPU run reports no skips
  (``gpu`` tests without a GPU, ``no_gpu`` tests with one), and puts the longest files first
  (tests/file_order.py)."""
  unwanted = "no_gpu" if jax.default_backend() == "gpu" else "gpu"
  deselected = [item for item in items if item.get_closest_marker(unwanted) is not None]
  if deselected:
    config.hook.pytest_deselected(items=deselected)
  kept = [item for item in items if item.get_closest_marker(unwanted) is None]
  items[:] = file_order.longest_first(kept, file_order.load())


@pytest.fixture(scope="session", autouse=True)
def _network_log(tmp_path_factory):
  """Guards this process's sockets and, through PYTHONPATH, those of every Python process a
  test starts (tests/network_guard.py); refused attempts are appended to the returned file."""
  log = tmp_path_factory.mktemp("network") / "refused.log"
  log.touch()
  site = pathlib.Path(__file__).parent / "network_guard_site"
  os.environ[network_guard.LOG_ENV] = str(log)
  os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(site), os.environ.get("PYTHONPATH", "")])
  )
  network_guard.install()
  return log


@pytest.fixture(autouse=True)
def _no_network(_network_log):
  """Fails a test that tried to reach another machine, even where its code caught the error.

  tensorflow-datasets would ask Google Cloud Storage for the metadata of a registered dataset
  that is not prepared locally (through TensorFlow's C++ file system, which the socket guard
  does not see); its switch keeps it off whatever the version's default.
  """
  from tensorflow_datasets.core.utils import gcs_utils  # pylint: disable=g-import-not-at-top

  gcs_utils._is_gcs_disabled = True  # pylint: disable=protected-access
  before = _network_log.stat().st_size
  yield
  with open(_network_log, encoding="utf-8") as f:
    f.seek(before)
    refused = f.read()
  if refused:
    pytest.fail(f"the test tried to reach the network: {refused.strip()}", pytrace=False)


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
def small_corpus_keys(tmp_path_factory):
  """Config keys training on `run_helpers.small_corpus` (one file per worker), for runs that
  check memory, checkpoints or weights rather than the data: tokenising the whole embedded
  corpus would cost such a run more than its few steps. Treat it as read-only."""
  from tests import run_helpers  # pylint: disable=g-import-not-at-top

  return run_helpers.small_corpus_keys(tmp_path_factory.mktemp("small_corpus"))


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
