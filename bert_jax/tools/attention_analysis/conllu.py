"""Sentences of a CoNLL-U file (Universal Dependencies): each word's form, head and relation.

Columns are ID, FORM, LEMMA, UPOS, XPOS, FEATS, HEAD, DEPREL, DEPS, MISC, tab-separated;
``#`` lines are comments and a blank line ends a sentence. Multi-word-token lines (ID
``3-4``) and empty nodes (ID ``5.1``) are skipped: the syntactic words are the rows with an
integer ID.
"""

import dataclasses

from etils import epath

from bert_jax.errors import UserInputError

_COLUMNS = 10
_FORM, _UPOS, _HEAD, _DEPREL = 1, 3, 6, 7
ROOT = "root"  # HEAD 0's relation; it points at no word, so it is no relation between words.


@dataclasses.dataclass(frozen=True)
class Sentence:
  """One sentence's words and their dependency tree (word positions 0-based).

  Attributes:
    words: the FORM of each word.
    heads: the position of each word's head, -1 for the root (HEAD 0).
    relations: each word's DEPREL, subtypes kept ("nmod:poss").
    upos: each word's universal part of speech ("_" when the file gives none).
    line: the file's line number of the sentence's first word, for messages.
  """

  words: tuple
  heads: tuple
  relations: tuple
  upos: tuple
  line: int


def _sentence(rows, path) -> Sentence:
  words, heads, relations, upos = [], [], [], []
  for line_number, columns in rows:
    head, relation = columns[_HEAD], columns[_DEPREL]
    if head == "_" or relation == "_":
      raise UserInputError(
        f"{path}:{line_number}: the word {columns[_FORM]!r} has no HEAD / DEPREL; "
        "analyze-attention needs a parsed treebank (columns 7 and 8 filled)"
      )
    try:
      heads.append(int(head) - 1)
    except ValueError:
      raise UserInputError(
        f"{path}:{line_number}: HEAD {head!r} is not a word number; pass a CoNLL-U file"
      ) from None
    words.append(columns[_FORM])
    relations.append(relation)
    upos.append(columns[_UPOS])
  for (line_number, _), head in zip(rows, heads):
    if not -1 <= head < len(words):
      raise UserInputError(
        f"{path}:{line_number}: HEAD {head + 1} is past the sentence's {len(words)} words"
      )
  return Sentence(tuple(words), tuple(heads), tuple(relations), tuple(upos), rows[0][0])


def read(path) -> list:
  """The `Sentence`s of a CoNLL-U file, in file order.

  Raises:
    UserInputError: the file is missing, has a line with fewer than 10 columns, a word
      without HEAD or DEPREL, or no sentence.
  """
  path = epath.Path(path)
  if not path.is_file():
    raise UserInputError(f"--conllu={path} is not a file; pass a CoNLL-U treebank (.conllu)")
  sentences, rows = [], []
  for line_number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
    if not line.strip():
      if rows:
        sentences.append(_sentence(rows, path))
      rows = []
      continue
    if line.startswith("#"):
      continue
    columns = line.split("\t")
    if len(columns) != _COLUMNS:
      missing = " and so no HEAD / DEPREL" if len(columns) <= _DEPREL else ""
      raise UserInputError(
        f"{path}:{line_number}: {len(columns)} tab-separated columns{missing}; CoNLL-U has "
        f"{_COLUMNS} (ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC)"
      )
    if not columns[0].isdigit():  # Multi-word tokens (3-4) and empty nodes (5.1).
      continue
    rows.append((line_number, columns))
  if rows:
    sentences.append(_sentence(rows, path))
  if not sentences:
    raise UserInputError(f"--conllu={path} holds no sentence")
  return sentences
