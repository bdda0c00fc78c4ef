"""The persistent compilation cache: a second process with the same config loads every program
from the cache, moved to another path meanwhile, and compiles nothing new."""

import json
import shutil
import subprocess
import sys

from tests import run_helpers

# Runs `bert_jax.main` and prints jax's compilation-cache events (jax counts a request, then a
# hit, or a miss when it writes a new entry).
_COUNTING_MAIN = """
import collections, json, sys
import jax
events = collections.Counter()
jax.monitoring.register_event_listener(lambda name, **_: events.update([name]))
from bert_jax import main
status = main.run(sys.argv)
print(json.dumps({"status": status, **{k.split("/")[-1]: v for k, v in events.items()}}))
"""


def _corpus(path):
  """Eight short documents: enough to pair and hold out, quick to tokenise."""
  documents = [
    "\n".join(f"document {d} sentence {s} says something about {d * s}." for s in range(6))
    for d in range(8)
  ]
  path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
  return path


def _run(workdir, flags):
  child = subprocess.run(
    [sys.executable, "-c", _COUNTING_MAIN, *run_helpers.main_command(workdir, flags)[3:]],
    env=run_helpers.env(),
    cwd=run_helpers.REPO,
    capture_output=True,
    text=True,
    timeout=600,
    check=False,
  )
  assert child.returncode == 0, child.stderr[-3000:]
  events = json.loads(child.stdout.strip().splitlines()[-1])
  assert events.pop("status") == 0, child.stderr[-3000:]
  return events


def _entries(cache):
  return sorted(p.name for p in cache.iterdir())


def test_a_second_process_with_the_same_config_compiles_nothing_new(tmp_path):
  cache = tmp_path / "cache"
  flags = run_helpers.small_flags(num_train_steps=1, checkpoint_every_steps=1)
  flags += [
    f"--config.data.corpus_paths=('{_corpus(tmp_path / 'corpus.txt')}',)",
    "--config.data.num_eval_examples=8",
  ]
  first = _run(tmp_path / "first", [*flags, f"--config.compilation_cache_dir={cache}"])
  written = _entries(cache)
  # The cache opens at the run's commit point (after init): the train and eval steps at least,
  # each written on a miss.
  assert first["cache_misses"] >= 2 and len(written) == first["cache_misses"], (first, written)
  assert first.get("cache_hits", 0) == 0, first

  # Another workdir, the same cache at another path (as a copied workdir's, or a bucket mounted
  # elsewhere): the entries' keys do not hold the cache's own path.
  moved = shutil.move(cache, tmp_path / "elsewhere")
  second = _run(tmp_path / "second", [*flags, f"--config.compilation_cache_dir={moved}"])
  assert second.get("cache_misses", 0) == 0, second
  assert second["cache_hits"] == first["cache_misses"], (first, second)
  assert _entries(moved) == written
