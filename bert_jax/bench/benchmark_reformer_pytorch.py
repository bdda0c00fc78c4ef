"""Forward+backward time of one LSH attention layer: bert_jax against reformer-pytorch, on CPU.

  python -m bert_jax.bench.benchmark_reformer_pytorch --lengths=4096,16384 --rounds=5

Both layers run in this one process on float32 CPU with the same thread budget, and their timed
calls alternate round by round, so background load shifts both medians alike. Prints one JSON
line per length with both medians and ``ratio`` = torch / jax (> 1: bert_jax is faster).

Settings matched: d_model, heads (head_dim = d_model / heads), n_hashes, batch 1, non-causal,
shared-QK projection with length-normalised keys, one chunk looked back, the loss
sum(out ** 2) differentiated with respect to every parameter and the input. reformer-pytorch's
``bucket_size`` is its chunk length: it uses n_buckets = L / bucket_size and cuts the sorted
sequence into n_hashes * n_buckets chunks of bucket_size. Differences left in place (each is
bert_jax's documented default):

- n_buckets: bert_jax 2 * L / chunk_len, twice reformer-pytorch's L / bucket_size, hashed with
  one rotation up to 256 buckets (4K tokens: a hashing matmul twice reformer-pytorch's) and
  factorised above (16K tokens: 512 = 16 x 32 buckets from 24 rotations instead of one
  rotation of 256);
- duplicate counting: bert_jax subtracts log(count) for keys seen in several rounds
  (``dedup_correction``); reformer-pytorch's default ``allow_duplicate_attention=True`` skips it;
- bert_jax's layer has biases on its projections; reformer-pytorch's have none.

``--matched`` adds a bert_jax point hashed exactly as reformer-pytorch hashes (one rotation,
n_buckets = L / chunk_len) and without duplicate counting. ``load_1m`` is the machine's
one-minute load average after the length's rounds (the CPU is shared; compare ratios).
"""

import json
import os
import statistics
import time

from absl import flags

from bert_jax.bench import attention_timing
from bert_jax.cli import runner

_LENGTHS = flags.DEFINE_list("lengths", ["4096", "16384"], "Sequence lengths.")
_ROUNDS = flags.DEFINE_integer("rounds", 5, "Timed rounds per length (after one warmup each).")
_THREADS = flags.DEFINE_integer("threads", 2, "torch intra-op threads (match the CPU cores).")
_MATCHED = flags.DEFINE_bool(
  "matched", False, "Also time bert_jax with reformer-pytorch's n_buckets and no dedup."
)

D_MODEL, HEADS, CHUNK_LEN, N_HASHES, BATCH = 256, 4, 64, 4, 1


def _torch_step(length):
  """A callable running one forward+backward of reformer-pytorch's LSHSelfAttention."""
  import torch  # pylint: disable=g-import-not-at-top
  from reformer_pytorch import LSHSelfAttention  # pylint: disable=g-import-not-at-top

  torch.set_num_threads(_THREADS.value)
  torch.manual_seed(0)
  layer = LSHSelfAttention(
    dim=D_MODEL, heads=HEADS, bucket_size=CHUNK_LEN, n_hashes=N_HASHES, causal=False
  )
  x_BLD = torch.randn(BATCH, length, D_MODEL, dtype=torch.float32, requires_grad=True)

  def step():
    layer.zero_grad(set_to_none=True)
    x_BLD.grad = None
    loss = (layer(x_BLD) ** 2).sum()
    loss.backward()
    return loss.item()

  return step


def _jax_step(length, n_buckets=0, dedup_correction=True):
  """A callable running one jitted forward+backward of bert_jax's LSH SelfAttention layer."""
  from bert_jax.models.attention.layer import SelfAttention  # pylint: disable=g-import-not-at-top
  from bert_jax.models.config import LshOptions, ModelConfig  # pylint: disable=g-import-not-at-top

  config = ModelConfig(
    vocab_size=8,
    hidden_size=D_MODEL,
    num_heads=HEADS,
    intermediate_size=4 * D_MODEL,
    num_layers=1,
    max_position_embeddings=length,
    hidden_dropout_rate=0.0,
    attention_dropout_rate=0.0,
    attention_kind="lsh",
    lsh=LshOptions(
      chunk_len=CHUNK_LEN, n_hashes=N_HASHES, n_buckets=n_buckets, dedup_correction=dedup_correction
    ),
  )
  return attention_timing.layer_forward_backward(SelfAttention(config), (BATCH, length, D_MODEL))


def _seconds(step):
  start = time.perf_counter()
  step()
  return time.perf_counter() - start


def main(argv):
  del argv
  for length in (int(n) for n in _LENGTHS.value):
    steps = {"torch": _torch_step(length), "jax": _jax_step(length)}
    if _MATCHED.value:
      steps["jax_matched"] = _jax_step(
        length, n_buckets=length // CHUNK_LEN, dedup_correction=False
      )
    for step in steps.values():  # Warmup: compiles jax, warms torch's allocator.
      step()
    times = {name: [] for name in steps}
    for _ in range(_ROUNDS.value):
      for name, step in steps.items():
        times[name].append(_seconds(step))
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    result = {
      "length": length,
      "d_model": D_MODEL,
      "heads": HEADS,
      "chunk_len": CHUNK_LEN,
      "n_hashes": N_HASHES,
      "batch": BATCH,
      "rounds": _ROUNDS.value,
      "torch_s": round(medians["torch"], 4),
      "jax_s": round(medians["jax"], 4),
      "ratio": round(medians["torch"] / medians["jax"], 2),
      "load_1m": round(os.getloadavg()[0], 2),
    }
    if _MATCHED.value:
      result["jax_matched_s"] = round(medians["jax_matched"], 4)
      result["ratio_matched"] = round(medians["torch"] / medians["jax_matched"], 2)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
  raise SystemExit(runner.run_absl(main))
