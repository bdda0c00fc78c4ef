"""Writes a synthetic parallel corpus where a word can only be recovered from its translation.

  python -m bert_jax.tools.synthetic_pairs --output=/tmp/xlm_pairs --pairs=4000

Two made-up languages of ``--words`` words each (``a0 a1 ...`` and ``b0 b1 ...``) and a random
one-to-one translation between them. A sentence of language A is a uniformly random word
sequence, so a masked word is unpredictable from the rest of it; its translation (the words
mapped one by one, same order) determines it. Writes ``pairs.tsv`` (``source<TAB>target`` per
line, data.pairs_path of configs/xlm_tlm_tiny.py), ``vocab.txt`` (BERT's special tokens and
every word whole; data.vocab_path) and ``translation.tsv`` (the word mapping).
"""

import argparse
import os
import sys

import numpy as np

from bert_jax.cli import runner
from bert_jax.errors import UserInputError

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def write_corpus(output, *, pairs, words, min_length, max_length, seed=0):
  """Writes pairs.tsv, vocab.txt and translation.tsv under ``output``.

  Returns:
    The translation as an int array: word i of language A is word ``translation[i]`` of B.

  Raises:
    UserInputError: sizes out of range.
  """
  if pairs < 1 or words < 2 or not 1 <= min_length <= max_length:
    raise UserInputError(
      f"--pairs={pairs}, --words={words}, --min_length={min_length}, --max_length={max_length}:"
      " need pairs >= 1, words >= 2 and 1 <= min_length <= max_length"
    )
  rng = np.random.default_rng(seed)
  translation = rng.permutation(words)
  lines = []
  for length in rng.integers(min_length, max_length + 1, size=pairs):
    source = rng.integers(0, words, size=length)
    target = translation[source]
    lines.append(" ".join(f"a{w}" for w in source) + "\t" + " ".join(f"b{w}" for w in target))
  os.makedirs(output, exist_ok=True)
  vocab = list(SPECIAL_TOKENS) + [f"a{i}" for i in range(words)] + [f"b{i}" for i in range(words)]
  for name, text in (
    ("pairs.tsv", lines),
    ("vocab.txt", vocab),
    ("translation.tsv", [f"a{i}\tb{j}" for i, j in enumerate(translation)]),
  ):
    with open(os.path.join(output, name), "w", encoding="utf-8") as f:
      f.write("\n".join(text) + "\n")
  return translation


def main(argv=None):
  """Runs the tool on ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
  parser = argparse.ArgumentParser(prog="python -m bert_jax.tools.synthetic_pairs")
  parser.add_argument("--output", required=True, help="directory to write")
  parser.add_argument("--pairs", type=int, default=4000)
  parser.add_argument("--words", type=int, default=20, help="words per language")
  parser.add_argument("--min_length", type=int, default=4, help="words per sentence, at least")
  parser.add_argument("--max_length", type=int, default=8, help="words per sentence, at most")
  parser.add_argument("--seed", type=int, default=0)
  return runner.run_argparse(
    parser,
    lambda args: write_corpus(
      args.output,
      pairs=args.pairs,
      words=args.words,
      min_length=args.min_length,
      max_length=args.max_length,
      seed=args.seed,
    ),
    argv,
  )


if __name__ == "__main__":
  sys.exit(main())
