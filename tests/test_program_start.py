"""What a `bert-jax train` process does at its start, seen from real interpreters.

- A host without an accelerator starts quietly with the tpu and cuda extras installed. README's
  test command installs libtpu and jax's CUDA plugin; on a CPU host, without `JAX_PLATFORMS`,
  jax would initialise both and print libtpu's start-up errors (and, when two runs start at
  once, advice to delete its lockfile) and a CUDA traceback. Every command first limits jax to
  the platforms the host has (`environment.limit_jax_to_present_platforms`).
- A run imports TensorFlow for tf.data, but not the Keras that TensorFlow would import with
  itself (nor the matplotlib and scikit-learn that Keras brings, nor the fine-tuning metrics'
  scipy.stats): together about 3 s of every run's start.
- A second process with the same config loads every program from the persistent compilation
  cache, moved to another path meanwhile, and compiles nothing new.

The first two are seen in the same two runs, started at once.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests import program_server, run_helpers

# Lines seen from libtpu and the CUDA plugin on a CPU host when jax initialises them.
NOISE = (
  "TPU",
  "libtpu",
  "lockfile",
  "Source Location Trace",
  "Unable to initialize backend",
  "cuDNN",
  "CUDA",
  "Traceback",
)


def _corpus(path):
  """Eight short documents: enough to pair and hold out, quick to tokenise."""
  documents = [
    "\n".join(f"document {d} sentence {s} says something about {d * s}." for s in range(6))
    for d in range(8)
  ]
  path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
  return path


def _flags(corpus, cache):
  flags = run_helpers.small_flags(num_train_steps=1, checkpoint_every_steps=1)
  return [
    *flags,
    f"--config.data.corpus_paths=('{corpus}',)",
    "--config.data.num_eval_examples=8",
    f"--config.compilation_cache_dir={cache}",
  ]


def _command(workdir, flags):
  """The program's command line, run by `tests/reporting_main.py`, which reports at exit."""
  return [
    sys.executable,
    "-m",
    "tests.reporting_main",
    *run_helpers.main_command(workdir, flags)[3:],
  ]


def _start(workdir, flags, environment):
  """A real interpreter of its own, which shows what the program imports and prints."""
  return subprocess.Popen(
    _command(workdir, flags),
    env=environment,
    cwd=run_helpers.REPO,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )


def _finish(process, workdir):
  """(the report of a one-step run, its output) once it has exited."""
  stdout, stderr = process.communicate(timeout=600)
  return _report(process.returncode, stdout, stderr, workdir)


def _report(returncode, stdout, stderr, workdir):
  assert returncode == 0, stderr[-3000:]
  assert run_helpers.read_metrics(workdir)[-1]["step"] == 1
  return json.loads(stdout.strip().splitlines()[-1]), stdout + stderr


@pytest.fixture(scope="module")
def two_runs_at_once(tmp_path_factory):
  """Two one-step runs started at once, without `JAX_PLATFORMS`, each with its own compilation
  cache: ([(report, output, cache)] per run, the root directory, the corpus)."""
  root = tmp_path_factory.mktemp("program_start")
  corpus = _corpus(root / "corpus.txt")
  environment = run_helpers.env()
  del environment["JAX_PLATFORMS"]
  caches = [root / f"cache{i}" for i in range(2)]
  processes = [
    _start(root / f"run{i}", _flags(corpus, cache), environment) for i, cache in enumerate(caches)
  ]
  runs = [
    (*_finish(process, root / f"run{i}"), cache)
    for i, (process, cache) in enumerate(zip(processes, caches))
  ]
  return runs, root, corpus


def test_two_runs_started_at_once_without_jax_platforms_print_no_accelerator_noise(
  two_runs_at_once,
):
  runs, _, _ = two_runs_at_once
  for _, output, _ in runs:
    noisy = [line for line in output.splitlines() if any(word in line for word in NOISE)]
    assert not noisy, "\n".join(noisy)
    assert re.search(r"1 local / 1 global devices \(cpu\)", output), output[-3000:]


def test_a_set_jax_platforms_is_left_alone(monkeypatch):
  from bert_jax import environment

  monkeypatch.setenv("JAX_PLATFORMS", "cpu")
  assert environment.limit_jax_to_present_platforms() is None
  assert os.environ["JAX_PLATFORMS"] == "cpu"


def test_a_run_imports_tensorflow_but_not_keras_matplotlib_scikit_learn_or_scipy_stats(
  two_runs_at_once,
):
  runs, _, _ = two_runs_at_once
  for report, _, _ in runs:
    assert report["modules"] == ["tensorflow"]


def test_a_second_process_with_the_same_config_compiles_nothing_new(two_runs_at_once):
  runs, root, corpus = two_runs_at_once
  first, _, cache = runs[0]
  written = sorted(p.name for p in cache.iterdir())
  # The cache opens at the run's commit point (after init): the train and eval steps at least,
  # each written on a miss.
  assert first["cache_misses"] >= 2 and len(written) == first["cache_misses"], (first, written)
  assert first.get("cache_hits", 0) == 0, first

  # Another workdir, the same cache at another path (as a copied workdir's, or a bucket mounted
  # elsewhere): the entries' keys do not hold the cache's own path.
  moved = shutil.move(cache, root / "elsewhere")
  # A process of its own that imported nothing of its own yet: a fork of the test worker's
  # program server (its imports do not matter here).
  done = program_server.run(
    _command(root / "second", _flags(corpus, moved)), run_helpers.env(), run_helpers.REPO, 600
  )
  second, _ = _report(done.returncode, done.stdout, done.stderr, root / "second")
  assert second.get("cache_misses", 0) == 0, second
  assert second["cache_hits"] == first["cache_misses"], (first, second)
  assert sorted(p.name for p in moved.iterdir()) == written
