"""Writes a synthetic parallel corpus where a word can only be recovered from its translation.

  python -m bert_jax.tools.synthetic_pairs --output=/tmp/xlm_pairs --pairs=4000

Two made-up languages of ``--words`` words each (``a0 a1 ...`` and ``b0 b1 ...``) and a random
one-to-one translation between them. A sentence of language A is a uniformly random word
sequence, so a masked word is unpredictable from the rest of it; its translation (the words
mapped one by one, same order) determines it. Writes ``pairs.tsv`` (``source<TAB>target`` per
line, data.pairs_path of configs/xlm_tlm_tiny.py), ``vocab.txt`` (BERT's special tokens and
every word whole; data.vocab_path) and ``translation.tsv`` (the word mapping).
"""

import os

import numpy as np
from absl import flags

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


def _define_flags(values: flags.FlagValues):
  define = {"flag_values": values}
  flags.DEFINE_string("output", None, "Directory to write.", **define)
  flags.mark_flag_as_required("output", flag_values=values)
  flags.DEFINE_integer("pairs", 4000, "Sentence pairs to write.", **define)
  flags.DEFINE_integer("words", 20, "Words per language.", **define)
  flags.DEFINE_integer("min_length", 4, "Words per sentence, at least.", **define)
  flags.DEFINE_integer("max_length", 8, "Words per sentence, at most.", **define)
  flags.DEFINE_integer("seed", 0, "Seed of the translation and the sentences.", **define)


def _write(values: flags.FlagValues):
  write_corpus(
    values.output,
    pairs=values.pairs,
    words=values.words,
    min_length=values.min_length,
    max_length=values.max_length,
    seed=values.seed,
  )


def main(argv=None) -> int:
  """Runs the tool on ``argv`` (default ``sys.argv``); returns the exit status."""
  return runner.run(__doc__, _define_flags, _write, argv)


if __name__ == "__main__":
  raise SystemExit(main())
