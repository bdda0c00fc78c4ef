"""Text files -> sharded TFRecords of unmasked token ids for pretraining (masking stays dynamic).

  python -m bert_jax.tools.create_pretraining_data --input='/data/wiki/*.txt' \\
      --output_dir=/data/wiki_128 --vocab=/data/vocab.txt --max_seq_length=128 --num_shards=64

Then train with ``--config.data.tfrecord_pattern='/data/wiki_128/train-*.tfrecord'
--config.data.eval_tfrecord_pattern='/data/wiki_128/eval-*.tfrecord'``.

* Input formats: ``bert`` (one sentence per line, blank lines between documents) or
  ``paragraphs`` (one paragraph per line, blank lines between documents; paragraphs are split
  into sentences).
* Styles: ``pairs`` (the original BERT sentence pairs with ``--objective`` nsp, sop or none) or
  ``full_sentences`` (RoBERTa packing with per-document ids, objective none).
* Parallel: input files are dealt to ``--process_count`` processes (``--process_index`` on
  each machine), or to a local pool with ``--num_workers``; process ``p`` writes shards ``p,
  p + n, ...``, its held-out documents to ``eval-<p>-of-<n>`` and ``metadata-<p>.json``.
* Streaming: documents are processed in windows of ``--window_documents`` (bounded memory; see
  `bert_jax.data.streaming_pretraining` for how that differs from pairing over the whole input),
  with a progress line every ``--progress_every_s`` seconds and words/s per process at the end.
* Deterministic: the output depends only on the inputs, the flags and ``--seed``.
* Nothing is dropped silently: non-UTF-8 lines, sentences cut to fit, documents spread over
  several rows are counted, logged and stored in the metadata.
"""

import argparse
import multiprocessing
import sys
import time

import numpy as np
from absl import logging

from bert_jax.cli import runner
from bert_jax.data import files as data_files
from bert_jax.data import (
  full_sentences,
  record_format,
  sentence_pairs,
  sentences,
  streaming_pretraining,
  text_corpus,
  tokenization,
)
from bert_jax.errors import UserInputError

INPUT_FORMATS = ("bert", "paragraphs")


def read_paragraph_documents(path):
  """Reads a file of paragraphs (one per line, blank lines between documents) into sentences.

  Returns:
    ``(documents, num_undecodable_lines)`` as ``text_corpus.read_documents_from_file``.
  """
  paragraphs, num_undecodable = text_corpus.read_documents_from_file(path)
  documents = [
    [s for p in document for s in sentences.split_sentences(p)] for document in paragraphs
  ]
  return [d for d in documents if d], num_undecodable


def _make_rows(corpus, args, rng, tokenizer):
  """Unmasked rows of one split (pairs laid out as they are written), and cut counts."""
  special = tokenizer.special_ids
  if args.style == "full_sentences":
    arrays, counts = full_sentences.pack_full_sentences(
      corpus,
      max_seq_length=args.max_seq_length,
      special_ids=special,
      document_order=rng.permutation(corpus.num_documents),
    )
    return streaming_pretraining.ArrayRows(arrays), {
      "sentences_cut": counts.sentences_cut,
      "documents_across_rows": counts.documents_across_rows,
    }
  spans = sentence_pairs.PairSpans.concatenate(
    [
      sentence_pairs.sample_pair_spans(
        corpus,
        max_seq_length=args.max_seq_length,
        short_seq_prob=args.short_seq_prob,
        rng=rng,
        objective=args.objective,
      )
      for _ in range(args.dupe_factor)
    ]
  )
  rows = sentence_pairs.PairRows(
    corpus, spans, max_seq_length=args.max_seq_length, special_ids=special
  )
  lengths = np.diff(corpus.sentence_starts)
  # Pairs are cut to max_seq_length - 3 tokens; a sentence longer than that always is.
  return rows, {"sentences_cut": int((lengths > args.max_seq_length - 3).sum())}


def run_process(args, process_index):
  """Writes the shards of one process; returns its metadata dict."""
  files = text_corpus.expand_paths(args.input.split(","))
  mine = files[process_index :: args.process_count]
  if not mine:
    raise UserInputError(
      f"{len(files)} input files cannot feed {args.process_count} processes; give at least "
      "as many files as processes (split the text into more files)"
    )
  start = time.monotonic()
  tokenizer = tokenization.load_tokenizer(args.vocab, lowercase=args.lowercase)
  data_files.makedirs(args.output_dir)  # A local folder or gs://.
  written, counts = streaming_pretraining.write_streaming(
    paths=mine,
    output_dir=args.output_dir,
    process_index=process_index,
    process_count=args.process_count,
    num_shards=args.num_shards,
    seed=args.seed,
    eval_fraction=args.eval_fraction,
    tokenizer=tokenizer,
    make_rows=lambda corpus, rng: _make_rows(corpus, args, rng, tokenizer),
    window_documents=args.window_documents,
    split_sentences=(sentences.split_sentences if args.input_format == "paragraphs" else None),
    progress_every_s=args.progress_every_s,
  )
  metadata = {
    "max_seq_length": args.max_seq_length,
    "style": args.style,
    "objective": args.objective,
    "vocab": data_files.absolute_path(args.vocab),
    "vocab_size": tokenizer.vocab_size,
    "lowercase": args.lowercase,
    "seed": args.seed,
    "process_index": process_index,
    "process_count": args.process_count,
    "input_files": mine,
    "files": written,
    "counts": counts,
  }
  record_format.write_metadata(args.output_dir, process_index, metadata)
  seconds = max(time.monotonic() - start, 1e-9)
  logging.info(
    "process %d: %s; %.0f s, %.0f words/s, %.0f tokens/s",
    process_index,
    ", ".join(f"{key} {value}" for key, value in sorted(counts.items())),
    seconds,
    counts["words"] / seconds,
    counts["tokens"] / seconds,
  )
  return metadata


def _run_in_worker(args_and_index):
  args, process_index = args_and_index
  logging.set_verbosity(logging.INFO)
  return run_process(args, process_index)


def _parser():
  parser = argparse.ArgumentParser(
    prog="python -m bert_jax.tools.create_pretraining_data",
    description="Text files -> sharded TFRecords of unmasked token ids with document ids.",
  )
  parser.add_argument("--input", required=True, help="text files or globs, comma-separated")
  parser.add_argument("--output_dir", required=True)
  parser.add_argument("--vocab", required=True, help="WordPiece vocab.txt or SentencePiece .model")
  parser.add_argument(
    "--lowercase",
    action=argparse.BooleanOptionalAction,
    default=True,
    help="uncased WordPiece (lowercase, strip accents)",
  )
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--num_shards", type=int, default=16, help="train shards over all processes")
  parser.add_argument("--style", choices=record_format.STYLES, default="pairs")
  parser.add_argument(
    "--objective",
    choices=sentence_pairs.OBJECTIVES,
    default="nsp",
    help="pairs style: nsp | sop | none (full_sentences: always none)",
  )
  parser.add_argument("--input_format", choices=INPUT_FORMATS, default="bert")
  parser.add_argument("--short_seq_prob", type=float, default=0.1)
  parser.add_argument(
    "--dupe_factor",
    type=int,
    default=1,
    help="pairs style: pairings of the text (masking is dynamic anyway)",
  )
  parser.add_argument(
    "--eval_fraction",
    type=float,
    default=0.05,
    help="documents held out to eval-*.tfrecord; 0 = none",
  )
  parser.add_argument("--seed", type=int, default=12345)
  parser.add_argument("--process_index", type=int, default=0)
  parser.add_argument("--process_count", type=int, default=1)
  parser.add_argument(
    "--num_workers",
    type=int,
    default=1,
    help="local worker pool: runs process indices 0..num_workers-1",
  )
  parser.add_argument(
    "--window_documents",
    type=int,
    default=2000,
    help="documents held in memory at once (NSP, hold-out and shuffle are "
    "drawn within a window); bounds memory whatever the input size",
  )
  parser.add_argument(
    "--progress_every_s",
    type=float,
    default=30.0,
    help="seconds between progress lines (documents/s, tokens/s, ETA)",
  )
  return parser


def parse_args(argv):
  """The tool's flags, checked; a bad flag or value raises `UserInputError`."""
  return _checked(runner.parse_args(_parser(), argv))


def _checked(args):
  if args.style == "full_sentences":
    args.objective = "none"
  if args.num_workers > 1:
    if args.process_count > 1:
      raise UserInputError(
        "use either --num_workers (one machine) or --process_count/"
        "--process_index (one run per machine), not both"
      )
    args.process_count = args.num_workers
  if not 0 <= args.process_index < args.process_count:
    raise UserInputError(
      f"--process_index={args.process_index} is not in [0, --process_count={args.process_count})"
    )
  if args.num_shards < 1 or args.num_shards % args.process_count:
    raise UserInputError(
      f"--num_shards={args.num_shards} is not a positive multiple of the {args.process_count} "
      "processes; every process writes the same number of shards"
    )
  if args.window_documents < 2:
    raise UserInputError(f"--window_documents={args.window_documents} must be at least 2")
  if args.dupe_factor < 1:
    raise UserInputError(f"--dupe_factor={args.dupe_factor} must be at least 1")
  sentence_pairs.check_max_seq_length(args.max_seq_length)
  return args


def main(argv=None):
  logging.set_verbosity(logging.INFO)

  def body(args):
    args = _checked(args)
    if args.num_workers > 1:
      with multiprocessing.get_context("spawn").Pool(args.num_workers) as pool:
        pool.map(_run_in_worker, [(args, p) for p in range(args.process_count)])
    else:
      run_process(args, args.process_index)

  return runner.run_argparse(_parser(), body, argv)


if __name__ == "__main__":
  sys.exit(main())
