"""Peak RSS and tokens/s of create_pretraining_data on an 18 MB and a 180 MB input.

  python -m bert_jax.bench.benchmark_create_pretraining_data --sizes_mb=18,180

Inputs are the embedded corpus repeated with shuffled document order; each run is a fresh
process, so its peak RSS (VmHWM) is its own. Prints one JSON line.
"""

import json
import os
import random
import subprocess
import sys
import tempfile
import time

from absl import flags

from bert_jax.cli import runner
from bert_jax.data import default_corpus
from bert_jax.errors import UserInputError

_CHILD = """
import json, sys, time
from bert_jax.tools import create_pretraining_data
start = time.perf_counter()
assert create_pretraining_data.main(sys.argv) == 0
wall = time.perf_counter() - start
hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]
print(json.dumps({"wall_s": wall, "peak_rss_mb": int(hwm) / 1024}))
"""


def build_input(path, size_mb, seed):
  """Writes ``size_mb`` MB of the embedded corpus, documents shuffled on every repetition."""
  with open(default_corpus.default_corpus_path(), encoding="utf-8") as f:
    documents = [d for d in f.read().split("\n\n") if d.strip()]
  rng = random.Random(seed)
  written = 0
  with open(path, "w", encoding="utf-8") as f:
    while written < size_mb * 1e6:
      rng.shuffle(documents)
      for document in documents:
        text = document.strip() + "\n\n"
        f.write(text)
        written += len(text.encode("utf-8"))
        if written >= size_mb * 1e6:
          break


def _define_flags(values: flags.FlagValues):
  define = {"flag_values": values}
  flags.DEFINE_list("sizes_mb", ["18", "180"], "Input sizes to time, in MB.", **define)
  flags.DEFINE_integer(
    "window_documents",
    2000,
    "create_pretraining_data's --window_documents.",
    lower_bound=2,
    **define,
  )


def _sizes(values: flags.FlagValues):
  """``--sizes_mb`` as positive integers."""
  try:
    sizes = [int(s) for s in values.sizes_mb]
  except ValueError:
    sizes = []
  if not sizes or min(sizes) < 1:
    raise UserInputError(
      f"--sizes_mb={','.join(values.sizes_mb)} is not a comma-separated list of sizes, e.g. 18,180"
    )
  return sizes


def main(argv=None) -> int:
  """Runs the benchmark on ``argv`` (default ``sys.argv``); returns the exit status."""
  return runner.run(__doc__, _define_flags, _benchmark, argv)


def _benchmark(args: flags.FlagValues):
  sizes = _sizes(args)
  result = {"window_documents": args.window_documents}
  with tempfile.TemporaryDirectory() as tmp:
    for size in sizes:
      text = os.path.join(tmp, f"input_{size}mb.txt")
      build_input(text, size, seed=size)
      out = os.path.join(tmp, f"out_{size}")
      start = time.perf_counter()
      child = subprocess.run(
        [
          sys.executable,
          "-c",
          _CHILD,
          f"--input={text}",
          f"--output_dir={out}",
          f"--vocab={default_corpus.default_vocab_path()}",
          f"--window_documents={args.window_documents}",
          "--num_shards=4",
        ],
        check=True,
        capture_output=True,
        text=True,
      )
      measured = json.loads(child.stdout.strip().splitlines()[-1])
      with open(os.path.join(out, "metadata-00000.json"), encoding="utf-8") as f:
        tokens = json.load(f)["counts"]["tokens"]
      result[f"{size}mb"] = {
        "peak_rss_mb": round(measured["peak_rss_mb"], 1),
        "tokens": tokens,
        "tokens_per_s": round(tokens / measured["wall_s"]),
        "process_wall_s": round(time.perf_counter() - start, 1),
      }
  print(json.dumps(result))


if __name__ == "__main__":
  raise SystemExit(main())
