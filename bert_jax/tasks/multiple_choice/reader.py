"""Reads multiple-choice data in SWAG's CSV layout (Zellers et al. 2018, ``train.csv``/``val.csv``).

Columns (by header name; others such as the unnamed index, ``video-id``, ``fold-ind``,
``startphrase`` and ``gold-source`` are ignored): ``sent1`` the context, ``sent2`` the start of
the continuation, ``ending0`` .. ``ending{C-1}`` the candidate endings, ``label`` the index of the
true ending. A choice is read as sentence A = ``sent1``, sentence B = ``sent2 + " " + ending``,
as in BERT's SWAG setup (paper, section 4.4).

TensorFlow Datasets 4.9.10 has no ``swag`` builder (only ``hellaswag``, another dataset), so
SWAG is read from its CSV files only.
"""

import csv
import dataclasses
import io

from bert_jax.data import files
from bert_jax.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class ChoiceExample:
  """One multiple-choice question."""

  context: str
  start: str
  endings: tuple[str, ...]
  label: int


def read_swag_csv(path, num_choices=4):
  """Reads a SWAG-format CSV file.

  Args:
    path: the CSV file (UTF-8, with a header row).
    num_choices: C, the number of ``ending<i>`` columns to read.

  Returns:
    A list of :class:`ChoiceExample` in file order.

  Raises:
    FileNotFoundError: the file does not exist.
    UserInputError: missing columns, a row with another number of fields than the header, a
      label that is not an integer in [0, C), broken CSV quoting, or no rows.
  """
  required = ["sent1", "sent2"] + [f"ending{i}" for i in range(num_choices)] + ["label"]
  try:
    with io.StringIO(files.read_text(path), newline="") as f:  # Local or gs://.
      reader = csv.reader(f, strict=True)
      header = next(reader, None)
      if header is None:
        raise UserInputError(
          f"SWAG file {path} is empty; it needs a header row with columns {', '.join(required)}"
        )
      missing = [name for name in required if name not in header]
      if missing:
        raise UserInputError(
          f"SWAG file {path} lacks the columns {', '.join(missing)} (header: {header}); "
          f"multiple-choice CSVs need {', '.join(required)} (num_choices={num_choices})"
        )
      column = {name: header.index(name) for name in required}
      examples = []
      for row in reader:
        where = f"{path}:{reader.line_num}"
        if not row:
          continue
        if len(row) != len(header):
          raise UserInputError(
            f"{where}: {len(row)} fields where the header has {len(header)};"
            " quote fields that contain commas"
          )
        examples.append(
          ChoiceExample(
            context=row[column["sent1"]],
            start=row[column["sent2"]],
            endings=tuple(row[column[f"ending{i}"]] for i in range(num_choices)),
            label=_label(row[column["label"]], num_choices, where),
          )
        )
  except FileNotFoundError:
    raise FileNotFoundError(
      f"SWAG file {path} does not exist; set data.train_path / "
      "data.eval_path to SWAG's train.csv / val.csv"
    ) from None
  except UnicodeDecodeError as e:
    raise UserInputError(
      f"SWAG file {path} is not UTF-8 text ({e.reason} at byte {e.start}); convert it to UTF-8"
    ) from None
  except csv.Error as e:
    raise UserInputError(
      f"{path}:{reader.line_num}: malformed CSV ({e}); check the quoting"
    ) from None
  if not examples:
    raise UserInputError(f"SWAG file {path} has a header but no rows")
  return examples


def _label(text, num_choices, where):
  try:
    label = int(text)
  except ValueError:
    label = -1
  if not 0 <= label < num_choices:
    raise UserInputError(
      f"{where}: label {text!r} is not an ending index in "
      f"0..{num_choices - 1}; fix the row or data.num_choices"
    )
  return label
