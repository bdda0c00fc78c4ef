"""Input-pipeline throughput: pre-tokenised TFRecords -> dynamically masked batches, one JSON line.

  python -m bert_jax.bench.benchmark_data                      # the embedded corpus, seq 128
  python -m bert_jax.bench.benchmark_data --tfrecord_pattern='/data/wiki_128/train-*.tfrecord' \\
      --vocab=/data/vocab.txt --masking=whole_word

Without ``--tfrecord_pattern`` it first writes the embedded corpus as TFRecords (pairs style)
into a temporary directory. It times ``--num_batches`` host batches after ``--warmup_batches``,
the same iterator the trainer uses (``PretrainingData.batches``), and prints
``{"sequences_per_sec": ..., ...}``.
"""

import json
import os
import sys
import tempfile
import time

from absl import flags

from bert_jax.cli import runner
from bert_jax.data import default_corpus, pretraining_config, pretraining_pipeline
from bert_jax.tools import create_pretraining_data


def _write_default_records(directory, max_seq_length):
  args = create_pretraining_data.parse_args(
    [
      f"--input={default_corpus.default_corpus_path()}",
      f"--output_dir={directory}",
      f"--vocab={default_corpus.default_vocab_path()}",
      f"--max_seq_length={max_seq_length}",
      "--num_shards=4",
      "--eval_fraction=0",
    ]
  )
  create_pretraining_data.run_process(args, 0)
  return os.path.join(directory, "train-*.tfrecord")


def measure(config, *, batch_size, num_batches, warmup_batches):
  """Sequences per second of the train iterator for ``config`` (a PretrainingDataConfig)."""
  data = pretraining_pipeline.PretrainingData(config)
  batches = data.batches(split="train", seed=0, global_batch_size=batch_size)
  for _ in range(warmup_batches):
    next(batches)
  start = time.perf_counter()
  for _ in range(num_batches):
    next(batches)
  elapsed = time.perf_counter() - start
  return num_batches * batch_size / elapsed, elapsed


def _define_flags(values: flags.FlagValues):
  define = {"flag_values": values}
  flags.DEFINE_string(
    "tfrecord_pattern", "", "TFRecords to read; empty: written from the embedded corpus.", **define
  )
  flags.DEFINE_string("vocab", "", "Vocab of the records; empty: the embedded vocab.", **define)
  flags.DEFINE_integer("max_seq_length", 128, "Tokens per example.", **define)
  flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per example.", **define)
  flags.DEFINE_string("masking", "token", "token | whole_word | span.", **define)
  flags.DEFINE_string("objective", "nsp", "Sentence objective: nsp | sop | none.", **define)
  flags.DEFINE_integer("batch_size", 256, "Sequences per batch.", **define)
  flags.DEFINE_integer("num_batches", 100, "Batches timed.", **define)
  flags.DEFINE_integer("warmup_batches", 10, "Batches read before timing.", **define)


def main(argv=None) -> int:
  """Runs the benchmark on ``argv`` (default ``sys.argv``); returns the exit status."""
  return runner.run(__doc__, _define_flags, _benchmark, argv)


def _benchmark(args: flags.FlagValues):
  """Measures the pipeline the flags describe and prints one JSON line."""
  with tempfile.TemporaryDirectory() as directory:
    pattern = args.tfrecord_pattern or _write_default_records(directory, args.max_seq_length)
    config = pretraining_config.PretrainingDataConfig(
      tfrecord_pattern=pattern,
      vocab_path=args.vocab,
      max_seq_length=args.max_seq_length,
      max_predictions_per_seq=args.max_predictions_per_seq,
      masking=args.masking,
      objective=args.objective,
      eval_fraction=0.0,
    )
    rate, elapsed = measure(
      config,
      batch_size=args.batch_size,
      num_batches=args.num_batches,
      warmup_batches=args.warmup_batches,
    )
  print(
    json.dumps(
      {
        "sequences_per_sec": round(rate, 1),
        "max_seq_length": args.max_seq_length,
        "masking": args.masking,
        "batch_size": args.batch_size,
        "num_batches": args.num_batches,
        "seconds": round(elapsed, 3),
        "cpu_count": os.cpu_count(),
      }
    )
  )


if __name__ == "__main__":
  sys.exit(main())
