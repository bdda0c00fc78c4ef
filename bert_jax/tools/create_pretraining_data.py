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

import multiprocessing
import time
import types

import numpy as np
from absl import flags, logging

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


def _define_flags(values: flags.FlagValues):
  define = {"flag_values": values}
  flags.DEFINE_string("input", None, "Text files or globs, comma-separated.", **define)
  flags.DEFINE_string("output_dir", None, "Directory the TFRecords are written to.", **define)
  flags.DEFINE_string("vocab", None, "WordPiece vocab.txt or SentencePiece .model.", **define)
  for name in ("input", "output_dir", "vocab"):
    flags.mark_flag_as_required(name, flag_values=values)
  flags.DEFINE_bool(
    "lowercase",
    True,
    "Uncased WordPiece (lowercase, strip accents); --nolowercase: cased.",
    **define,
  )
  flags.DEFINE_integer(
    "max_seq_length", 128, "Tokens per example, [CLS] and [SEP] included.", **define
  )
  flags.DEFINE_integer("num_shards", 16, "Train shards over all processes.", **define)
  flags.DEFINE_enum(
    "style",
    "pairs",
    record_format.STYLES,
    "pairs: BERT's sentence pairs; full_sentences: RoBERTa packing with document ids.",
    **define,
  )
  flags.DEFINE_enum(
    "objective",
    "nsp",
    sentence_pairs.OBJECTIVES,
    "Sentence objective of the pairs style (full_sentences: always none).",
    **define,
  )
  flags.DEFINE_enum(
    "input_format",
    "bert",
    INPUT_FORMATS,
    "bert: one sentence a line; paragraphs: one paragraph a line, split into sentences.",
    **define,
  )
  flags.DEFINE_float(
    "short_seq_prob",
    0.1,
    "Pairs style: share of examples cut to a random shorter length.",
    **define,
  )
  flags.DEFINE_integer(
    "dupe_factor", 1, "Pairs style: pairings of the text (masking is dynamic anyway).", **define
  )
  flags.DEFINE_float(
    "eval_fraction", 0.05, "Documents held out to eval-*.tfrecord; 0 = none.", **define
  )
  flags.DEFINE_integer("seed", 12345, "Seed of the pairing, hold-out and shuffle.", **define)
  flags.DEFINE_integer("process_index", 0, "This process's index (one run per machine).", **define)
  flags.DEFINE_integer("process_count", 1, "Processes the input files are dealt to.", **define)
  flags.DEFINE_integer(
    "num_workers", 1, "Local worker pool: runs process indices 0..num_workers-1.", **define
  )
  flags.DEFINE_integer(
    "window_documents",
    2000,
    "Documents held in memory at once (NSP, hold-out and shuffle are drawn within a window); "
    "bounds memory whatever the input size.",
    **define,
  )
  flags.DEFINE_float(
    "progress_every_s",
    30.0,
    "Seconds between progress lines (documents/s, tokens/s, ETA).",
    **define,
  )


def _namespace(values: flags.FlagValues) -> types.SimpleNamespace:
  """The parsed flags as plain attributes: picklable for the worker pool, and `_checked` may
  adjust them."""
  return types.SimpleNamespace(**values.flag_values_dict())


def parse_args(argv):
  """The tool's flags (``argv`` without the program name), checked.

  Raises:
    UserInputError: a bad flag or value.
  """
  values = flags.FlagValues()
  _define_flags(values)
  try:
    values(["create_pretraining_data", *argv])
  except flags.Error as error:
    raise UserInputError(
      f"{error}; see python -m bert_jax.tools.create_pretraining_data --help"
    ) from None
  return _checked(_namespace(values))


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


def main(argv=None) -> int:
  """Runs the tool on ``argv`` (default ``sys.argv``); returns the exit status."""
  logging.set_verbosity(logging.INFO)

  def body(values):
    args = _checked(_namespace(values))
    if args.num_workers > 1:
      with multiprocessing.get_context("spawn").Pool(args.num_workers) as pool:
        pool.map(_run_in_worker, [(args, p) for p in range(args.process_count)])
    else:
      run_process(args, args.process_index)

  return runner.run(__doc__, _define_flags, body, argv)


if __name__ == "__main__":
  raise SystemExit(main())
