"""Time and peak memory of attention layers and of deep stacks, one JSON line per point.

Attention mode: forward+backward (gradients of params and inputs) of one `SelfAttention` layer
per kind and length:

  python -m bert_jax.bench.benchmark_attention --kinds=dense,lsh,local \
      --lengths=1024,4096,16384,65536 --max_dense_length=8192

Depth mode: forward+backward of an encoder stack, reversible vs ordinary blocks:

  python -m bert_jax.bench.benchmark_attention --depths=2,4,8,16 --lengths=4096 --kinds=lsh

Every point runs in a fresh subprocess, so its peak resident memory (VmHWM, read by the child
from /proc/self/status after the last step) covers that point alone; ``base_rss_mb`` is the
child's resident memory after importing jax and building inputs, before compiling anything;
``fwd_bwd_cpu_s`` the CPU time (all threads, user + system) of a step, which other processes on
a shared machine inflate far less than the wall time ``fwd_bwd_s``; ``load_1m`` the machine's
one-minute load average after the point.
"""

import json
import os
import statistics
import subprocess
import sys
import time

from absl import flags

from bert_jax.bench import attention_timing
from bert_jax.cli import runner

_KINDS = flags.DEFINE_list("kinds", ["dense", "lsh", "local"], "Attention kinds.")
_LENGTHS = flags.DEFINE_list("lengths", ["1024", "4096", "16384", "65536"], "Sequence lengths.")
_DEPTHS = flags.DEFINE_list("depths", [], "Depth mode: encoder depths (empty = attention mode).")
_MAX_DENSE = flags.DEFINE_integer(
  "max_dense_length", 8192, "Longest dense point (its L x L logits must fit in memory)."
)
_D_MODEL = flags.DEFINE_integer("d_model", 256, "Model width.")
_HEADS = flags.DEFINE_integer("heads", 4, "Attention heads.")
_CHUNK = flags.DEFINE_integer("chunk_len", 64, "lsh/local chunk length (and lsh bucket size).")
_HASHES = flags.DEFINE_integer("n_hashes", 4, "lsh hash rounds.")
_BATCH = flags.DEFINE_integer("batch", 1, "Sequences per batch.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed repeats per point (after one warmup).")
_POINT = flags.DEFINE_string("point", "", "Internal: run one point given as JSON, in-process.")


def _peak_rss_mb():
  with open("/proc/self/status", encoding="ascii") as status:
    for line in status:
      if line.startswith("VmHWM:"):
        return int(line.split()[1]) / 1024
  raise RuntimeError("no VmHWM in /proc/self/status")


def _current_rss_mb():
  with open("/proc/self/status", encoding="ascii") as status:
    for line in status:
      if line.startswith("VmRSS:"):
        return int(line.split()[1]) / 1024
  raise RuntimeError("no VmRSS in /proc/self/status")


def _model_config(point):
  from bert_jax.models.config import LshOptions, ModelConfig  # pylint: disable=g-import-not-at-top

  width = point["d_model"]
  return ModelConfig(
    vocab_size=8,
    hidden_size=width,
    num_heads=point["heads"],
    intermediate_size=4 * width,
    num_layers=point.get("depth", 1),
    max_position_embeddings=point["length"],
    hidden_dropout_rate=0.0,
    attention_dropout_rate=0.0,
    attention_kind=point["kind"],
    reversible=point.get("blocks") == "reversible",
    ffn_chunk_len=point.get("ffn_chunk_len", 0),
    lsh=LshOptions(chunk_len=point["chunk_len"], n_hashes=point["n_hashes"]),
  )


def _run_point(point):
  """Compiles and times one forward+backward; returns the JSON-ready result."""
  from bert_jax.models.attention.layer import SelfAttention  # pylint: disable=g-import-not-at-top
  from bert_jax.models.encoder import Encoder  # pylint: disable=g-import-not-at-top

  config = _model_config(point)
  if "depth" in point:
    module = Encoder(config)
  else:
    module = SelfAttention(config)
  run_once = attention_timing.layer_forward_backward(
    module, (point["batch"], point["length"], point["d_model"])
  )
  base_rss_mb = _current_rss_mb()
  start = time.perf_counter()
  run_once()
  compile_and_first_s = time.perf_counter() - start
  times, cpu_times = [], []
  for _ in range(point["repeats"]):
    start, cpu_start = time.perf_counter(), time.process_time()
    run_once()
    times.append(time.perf_counter() - start)
    cpu_times.append(time.process_time() - cpu_start)
  return dict(
    point,
    fwd_bwd_s=round(statistics.median(times), 4),
    fwd_bwd_cpu_s=round(statistics.median(cpu_times), 4),
    first_call_s=round(compile_and_first_s, 2),
    peak_rss_mb=round(_peak_rss_mb(), 1),
    base_rss_mb=round(base_rss_mb, 1),
    tokens_per_s=round(point["batch"] * point["length"] / statistics.median(times), 1),
    load_1m=round(os.getloadavg()[0], 2),
  )


def _points():
  common = {
    "d_model": _D_MODEL.value,
    "heads": _HEADS.value,
    "chunk_len": _CHUNK.value,
    "n_hashes": _HASHES.value,
    "batch": _BATCH.value,
    "repeats": _REPEATS.value,
  }
  lengths = [int(n) for n in _LENGTHS.value]
  if _DEPTHS.value:
    for length in lengths:
      for kind in _KINDS.value:
        for blocks in ("ordinary", "reversible"):
          for depth in _DEPTHS.value:
            yield dict(
              common,
              kind=kind,
              length=length,
              depth=int(depth),
              blocks=blocks,
              ffn_chunk_len=_CHUNK.value,
            )
    return
  for kind in _KINDS.value:
    for length in lengths:
      if kind in ("dense", "fused") and length > _MAX_DENSE.value:
        continue
      yield dict(common, kind=kind, length=length)


def main(argv):
  del argv
  if _POINT.value:
    print(json.dumps(_run_point(json.loads(_POINT.value))), flush=True)
    return
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="1")
  for point in _points():
    # One process per point: its VmHWM is its own peak, untouched by earlier points.
    result = subprocess.run(
      [sys.executable, "-m", "bert_jax.bench.benchmark_attention", "--point", json.dumps(point)],
      capture_output=True,
      text=True,
      env=env,
      check=False,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode or not lines:
      tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
      print(json.dumps(dict(point, error=f"exit {result.returncode}: {tail}")), flush=True)
    else:
      print(lines[-1], flush=True)


if __name__ == "__main__":
  raise SystemExit(runner.run_absl(main))
