"""What a `bert-jax train` process spends its start on.

It imports TensorFlow for tf.data, but not the Keras that TensorFlow would import with itself
(nor the matplotlib and scikit-learn that Keras brings, nor the fine-tuning metrics'
scipy.stats): together about 3 s of every run's start. And a second process with the same
config loads every program from the persistent compilation cache, moved to another path
meanwhile, and compiles nothing new.
"""

import json
import shutil
import subprocess
import sys

import pytest

from tests import run_helpers

# Runs the program's entry point as `python -m bert_jax.main` does and prints, at exit, jax's
# compilation-cache events (jax counts a request, then a hit, or a miss when it writes a new
# entry) and which of `WATCHED` the process imported.
_REPORTING_MAIN = """
import atexit, collections, json, sys
import jax
WATCHED = {"keras", "matplotlib", "sklearn", "scipy.stats", "tensorflow"}
events = collections.Counter()
jax.monitoring.register_event_listener(lambda name, **_: events.update([name]))
atexit.register(lambda: print(json.dumps({
  "modules": sorted(WATCHED & set(sys.modules)),
  **{k.split("/")[-1]: v for k, v in events.items()},
})))
from bert_jax import main
main.main(sys.argv)
"""


def _corpus(path):
  """Eight short documents: enough to pair and hold out, quick to tokenise."""
  documents = [
    "\n".join(f"document {d} sentence {s} says something about {d * s}." for s in range(6))
    for d in range(8)
  ]
  path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
  return path


def _flags(directory):
  flags = run_helpers.small_flags(num_train_steps=1, checkpoint_every_steps=1)
  return [
    *flags,
    f"--config.data.corpus_paths=('{_corpus(directory / 'corpus.txt')}',)",
    "--config.data.num_eval_examples=8",
  ]


def _run(workdir, flags):
  child = subprocess.run(
    [sys.executable, "-c", _REPORTING_MAIN, *run_helpers.main_command(workdir, flags)[3:]],
    env=run_helpers.env(),
    cwd=run_helpers.REPO,
    capture_output=True,
    text=True,
    timeout=600,
    check=False,
  )
  assert child.returncode == 0, child.stderr[-3000:]
  assert run_helpers.read_metrics(workdir)[-1]["step"] == 1
  return json.loads(child.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
  """A one-step run with its own compilation cache: (its report, the cache, the root)."""
  root = tmp_path_factory.mktemp("program_start")
  cache = root / "cache"
  report = _run(root / "first", [*_flags(root), f"--config.compilation_cache_dir={cache}"])
  return report, cache, root


def test_a_run_imports_tensorflow_but_not_keras_matplotlib_scikit_learn_or_scipy_stats(
  first_run,
):
  report, _, _ = first_run
  assert report["modules"] == ["tensorflow"]


def test_a_second_process_with_the_same_config_compiles_nothing_new(first_run):
  first, cache, root = first_run
  written = sorted(p.name for p in cache.iterdir())
  # The cache opens at the run's commit point (after init): the train and eval steps at least,
  # each written on a miss.
  assert first["cache_misses"] >= 2 and len(written) == first["cache_misses"], (first, written)
  assert first.get("cache_hits", 0) == 0, first

  # Another workdir, the same cache at another path (as a copied workdir's, or a bucket mounted
  # elsewhere): the entries' keys do not hold the cache's own path.
  moved = shutil.move(cache, root / "elsewhere")
  second = _run(root / "second", [*_flags(root), f"--config.compilation_cache_dir={moved}"])
  assert second.get("cache_misses", 0) == 0, second
  assert second["cache_hits"] == first["cache_misses"], (first, second)
  assert sorted(p.name for p in moved.iterdir()) == written
