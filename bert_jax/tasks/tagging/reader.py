"""Reads token-tagging data: CoNLL column files and the TFDS ``conll2003`` family.

CoNLL layout (CoNLL-2003: ``word POS chunk NER``): one token per line, columns separated by
whitespace, the word in column 0; a blank line ends a sentence; ``-DOCSTART-`` lines mark
document boundaries and are not tokens. Any column can be the label (``label_column``, 0-based,
negative counts from the end: -1 is NER in CoNLL-2003, 1 POS, 2 chunk).

TFDS datasets built by ``tfds.dataset_builders.ConllDatasetBuilder`` (``conll2003``,
``conll2002``) store the same columns as features in the same order, so the same
``label_column`` picks the same column there. Nothing is ever downloaded.
"""

import dataclasses

from bert_jax.data import files, tfds_source
from bert_jax.errors import UserInputError

DOCSTART = "-DOCSTART-"


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
  """One sentence: its words and one label per word."""

  words: tuple[str, ...]
  labels: tuple[str, ...]


def read_conll(path, label_column=-1):
  """Reads a CoNLL column file into sentences.

  Args:
    path: the file (UTF-8).
    label_column: the column holding the label (0-based; negative counts from the end; the
      word column 0 is not allowed).

  Returns:
    A list of :class:`TaggedSentence` in file order.

  Raises:
    FileNotFoundError: the file does not exist.
    UserInputError: a line with another number of columns than the file's first token line,
      too few columns for ``label_column``, undecodable text, or no sentences at all.
  """
  try:
    lines = files.read_text(path).splitlines()  # Local or gs://.
  except FileNotFoundError:
    raise FileNotFoundError(
      f"CoNLL file {path} does not exist; set data.train_path / data.eval_path to files with "
      "one 'word ... label' line per token and blank lines between sentences"
    ) from None
  except UnicodeDecodeError as e:
    raise UserInputError(
      f"CoNLL file {path} is not UTF-8 text ({e.reason} at byte {e.start}); convert it to UTF-8"
    ) from None
  sentences, words, labels = [], [], []
  num_columns = None

  def end_sentence():
    if words:
      sentences.append(TaggedSentence(tuple(words), tuple(labels)))
      words.clear()
      labels.clear()

  for line_number, line in enumerate(lines, start=1):
    fields = line.split()
    if not fields:
      end_sentence()
      continue
    if fields[0] == DOCSTART:
      end_sentence()
      continue
    if num_columns is None:
      num_columns = len(fields)
      if num_columns < 2:
        raise UserInputError(
          f"{path}:{line_number}: {line.strip()!r} has one column; CoNLL lines need the word "
          "and at least one label column separated by whitespace"
        )
      label_index = _label_index(label_column, num_columns, f"{path}:{line_number}")
    elif len(fields) != num_columns:
      raise UserInputError(
        f"{path}:{line_number}: {len(fields)} columns where the file's first token line has "
        f"{num_columns} ({line.strip()!r}); words may not contain spaces and every token line "
        "needs the same columns"
      )
    words.append(fields[0])
    labels.append(fields[label_index])
  end_sentence()
  if not sentences:
    raise UserInputError(f"CoNLL file {path} holds no sentences; it needs 'word ... label' lines")
  return sentences


def _label_index(label_column, num_columns, where):
  """The 0-based index of ``label_column`` among ``num_columns`` (word first)."""
  index = label_column + num_columns if label_column < 0 else label_column
  if not 1 <= index < num_columns:
    raise UserInputError(
      f"{where}: data.conll_label_column={label_column} does not name a label column of "
      f"{num_columns} columns (column 0 is the word); use 1..{num_columns - 1} or "
      f"-1..-{num_columns - 1}"
    )
  return index


def read_tfds(name, *, split, label_column=-1, data_dir=""):
  """Reads one split of a prepared TFDS CoNLL dataset (e.g. ``conll2003``).

  Args:
    name: TFDS name (e.g. "conll2003").
    split: the split (conll2003: "train", "dev", "test"; slices allowed).
    label_column: column of the CoNLL file the label feature came from (-1 = last: NER).
    data_dir: TFDS data folder; empty = TFDS's default.

  Returns:
    ``(sentences, label_names)``: the sentences in stored order and the label feature's class
    names in id order.

  Raises:
    UserInputError: the dataset is not prepared, is not a CoNLL dataset, or lacks the split.
  """

  def check(builder):
    feature_names = list(builder.info.features.keys())
    if (
      not getattr(builder.builder_config, "ordered_features", None) or "tokens" not in feature_names
    ):
      raise UserInputError(
        f"TFDS dataset {name!r} is not a CoNLL dataset (features {feature_names}); use "
        "conll2003 or CoNLL files through data.train_path / data.eval_path"
      )

  builder, examples = tfds_source.open_split(name, split=split, data_dir=data_dir, check=check)
  column_names = list(builder.builder_config.ordered_features.keys())
  label_key = column_names[
    _label_index(label_column, len(column_names), f"TFDS {name} columns {column_names}")
  ]
  label_names = tuple(builder.info.features[label_key].feature.names)
  sentences = []
  for example in examples:
    words = tuple(w.decode("utf-8") for w in example["tokens"])
    if words:
      sentences.append(TaggedSentence(words, tuple(label_names[i] for i in example[label_key])))
  if not sentences:
    raise UserInputError(f"TFDS dataset {name!r} split {split!r} holds no sentences")
  return sentences, label_names


def label_vocabulary(sentences, label_names=()):
  """The label names in id order: ``label_names`` if given, else those of ``sentences``.

  Labels found in the data are ordered "O" first, then alphabetically, so the same data always
  gives the same ids.

  Raises:
    UserInputError: ``label_names`` repeats a name or misses a label of ``sentences``.
  """
  seen = {label for sentence in sentences for label in sentence.labels}
  if not label_names:
    return tuple(sorted(seen, key=lambda label: (label != "O", label)))
  if len(set(label_names)) != len(label_names):
    raise UserInputError(f"data.label_names {list(label_names)} repeats a name; list each once")
  missing = sorted(seen - set(label_names))
  if missing:
    raise UserInputError(
      f"labels {missing} occur in the data but not in data.label_names {list(label_names)}; "
      "add them, or leave data.label_names empty to take the labels from the training data"
    )
  return tuple(label_names)
