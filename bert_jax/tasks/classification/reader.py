"""GLUE tasks (and custom sentence / sentence-pair files): examples from local TSV/CSV or TFDS.

Each GLUE task has a fixed layout: which columns of its TSV hold the sentences and the label,
the label values in id order, the TFDS features of ``glue/<task>`` and the official metrics.
Label ids follow the TFDS ``glue`` ClassLabels, so a model fine-tuned on the TSVs and one
fine-tuned on TFDS agree on what each output means.

GLUE's TSVs are read without quote handling (their sentences contain unbalanced quotes); CSV
files (custom data) use standard CSV quoting. Files are UTF-8 (a byte-order mark, as MRPC's,
is skipped), local or on ``gs://`` (`bert_jax.data.files`).
"""

import csv
import dataclasses
import io

from bert_jax.data import files, tfds_source
from bert_jax.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class SentenceExample:
  """One example: a sentence or a sentence pair and its label (an id, or a float score)."""

  text_a: str
  text_b: str | None
  label: int | float


@dataclasses.dataclass(frozen=True)
class GlueLayout:
  """Where a task's TSV and TFDS examples keep their fields, and how they are scored.

  Attributes:
    text_a: TSV column of the first sentence (a header name, or an index for headerless files).
    text_b: TSV column of the second sentence; None for single-sentence tasks.
    label: TSV column of the label.
    label_names: TSV label values in id order; () for regression (a float score).
    tfds_text_a: the ``glue/<task>`` feature of the first sentence.
    tfds_text_b: the ``glue/<task>`` feature of the second sentence, or None.
    metrics: official GLUE metrics, names of `bert_jax.tasks.classification.metrics`.
    has_header: whether the TSV's first line names the columns (CoLA's train/dev do not).
  """

  text_a: str | int
  text_b: str | int | None
  label: str | int
  label_names: tuple[str, ...]
  tfds_text_a: str
  tfds_text_b: str | None
  metrics: tuple[str, ...]
  has_header: bool = True

  @property
  def num_labels(self) -> int:
    """Outputs of the head: the label count, or 1 for regression."""
    return len(self.label_names) or 1


_BINARY = ("0", "1")
_ENTAILMENT = ("entailment", "not_entailment")
GLUE_TASKS = {
  # CoLA's train/dev.tsv: source, label, original annotation, sentence (no header).
  "cola": GlueLayout(
    3, None, 1, _BINARY, "sentence", None, ("matthews_corrcoef",), has_header=False
  ),
  "sst2": GlueLayout("sentence", None, "label", _BINARY, "sentence", None, ("accuracy",)),
  "mrpc": GlueLayout(
    "#1 String", "#2 String", "Quality", _BINARY, "sentence1", "sentence2", ("f1", "accuracy")
  ),
  "qqp": GlueLayout(
    "question1", "question2", "is_duplicate", _BINARY, "question1", "question2", ("f1", "accuracy")
  ),
  "stsb": GlueLayout(
    "sentence1", "sentence2", "score", (), "sentence1", "sentence2", ("pearson", "spearman")
  ),
  "mnli": GlueLayout(
    "sentence1",
    "sentence2",
    "gold_label",
    ("entailment", "neutral", "contradiction"),
    "premise",
    "hypothesis",
    ("accuracy",),
  ),
  "qnli": GlueLayout(
    "question", "sentence", "label", _ENTAILMENT, "question", "sentence", ("accuracy",)
  ),
  "rte": GlueLayout(
    "sentence1", "sentence2", "label", _ENTAILMENT, "sentence1", "sentence2", ("accuracy",)
  ),
  "wnli": GlueLayout(
    "sentence1", "sentence2", "label", _BINARY, "sentence1", "sentence2", ("accuracy",)
  ),
}


def glue_layout(task: str) -> GlueLayout:
  """The layout of GLUE task ``task``; a UserInputError naming the known tasks otherwise."""
  if task not in GLUE_TASKS:
    raise UserInputError(
      f"data.glue_task={task!r} is not a GLUE task; choose one of "
      f"{', '.join(GLUE_TASKS)} (or leave it empty for a custom file)"
    )
  return GLUE_TASKS[task]


def custom_layout(text_a_column, text_b_column, label_column, label_names) -> GlueLayout:
  """The layout of a custom CSV/TSV with a header: named columns, labels in id order.

  ``label_names`` empty means regression on a float label; the metrics are accuracy (+ F1 for
  two labels), or Pearson/Spearman for regression.
  """
  if not text_a_column or not label_column:
    raise UserInputError(
      "a custom classification file needs data.text_a_column and data.label_column (header "
      "names; data.text_b_column too for sentence pairs), or set data.glue_task"
    )
  if len(set(label_names)) != len(label_names) or len(label_names) == 1:
    raise UserInputError(
      f"data.label_names={tuple(label_names)} must list at least two distinct labels in id "
      "order, e.g. --config.data.label_names=neg,pos (or none, for regression)"
    )
  metrics = (
    ("pearson", "spearman")
    if not label_names
    else ("accuracy", "f1")
    if len(label_names) == 2
    else ("accuracy",)
  )
  return GlueLayout(
    text_a_column, text_b_column or None, label_column, tuple(label_names), "", None, metrics
  )


def _column_index(column, header, path):
  if isinstance(column, int):
    return column
  if column not in header:
    raise UserInputError(
      f"{path} has no column {column!r} in its header {header}; check the "
      "file (its first line must name the columns) or the data.*_column keys"
    )
  return header.index(column)


def _label(value, layout: GlueLayout, where: str):
  if not layout.label_names:
    try:
      return float(value)
    except ValueError:
      raise UserInputError(
        f"{where}: label {value!r} is not a number (regression needs a float score); fix the row"
      ) from None
  if value not in layout.label_names:
    raise UserInputError(
      f"{where}: label {value!r} is not one of {layout.label_names}; fix the row, or the "
      "task / data.label_names (a custom file's labels in id order, e.g. "
      f"--config.data.label_names={','.join(layout.label_names + (value,))})"
    )
  return layout.label_names.index(value)


def _open_rows(path, has_header, key):
  """(header or None, (line number, row) pairs, whether CSV) of a local or ``gs://`` file."""
  if not files.is_file(path):
    raise UserInputError(
      f"data file {path} does not exist; set {key} to GLUE TSV files "
      "(e.g. MRPC/train.tsv, MRPC/dev.tsv, MRPC/test.tsv)"
    )
  is_csv = path.endswith(".csv")
  f = io.StringIO(files.read_text(path, "utf-8-sig"), newline="")  # Local or gs://.
  rows = csv.reader(f) if is_csv else csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
  header = next(rows, None) if has_header else None
  if has_header and header is None:
    raise UserInputError(f"{path} is empty; it needs a header line and examples")
  numbered = ((n, row) for n, row in enumerate(rows, start=2 if has_header else 1) if row)
  return header, numbered, is_csv


def _check_width(row, needed, where, is_csv):
  if len(row) < needed:
    raise UserInputError(
      f"{where} has {len(row)} columns, the task needs at least "
      f"{needed}; is it a {'CSV' if is_csv else 'TSV'} of this task?"
    )


def read_file(path: str, layout: GlueLayout, max_examples: int = 0) -> list[SentenceExample]:
  """Reads the labelled examples of a GLUE TSV (or a custom CSV/TSV) file.

  Args:
    path: the file; ``.csv`` files are comma-separated with CSV quoting, others tab-separated
      without quoting (as GLUE's TSVs).
    layout: its columns and labels (`glue_layout` or `custom_layout`).
    max_examples: stop after this many examples; 0 reads them all.

  Returns:
    The examples in file order.

  Raises:
    UserInputError: the file is missing, lacks a column, has a short row or a bad label
      (the message names the file and line). Paths may be local or ``gs://``.
  """
  header, rows, is_csv = _open_rows(path, layout.has_header, "data.train_path / data.eval_path")
  columns = [
    _column_index(c, header, path)
    for c in (layout.text_a, layout.text_b, layout.label)
    if c is not None
  ]
  examples = []
  for line_number, row in rows:
    where = f"{path}:{line_number}"
    _check_width(row, max(columns) + 1, where, is_csv)
    text_b = None if layout.text_b is None else row[columns[1]]
    examples.append(
      SentenceExample(row[columns[0]], text_b, _label(row[columns[-1]], layout, where))
    )
    if len(examples) == max_examples:
      break
  return examples


# GLUE's test.tsv files have a header even where train/dev.tsv do not (CoLA: index, sentence).
_TEST_TEXT_A = {3: "sentence"}
# The id column of a test file: GLUE's "index" (QQP's test.tsv calls it "id").
_INDEX_COLUMNS = ("index", "id")


def read_test_file(path: str, layout: GlueLayout) -> tuple[list[str], list[SentenceExample]]:
  """Reads an unlabelled test file: GLUE's test.tsv, or a custom CSV/TSV without its label.

  Args:
    path: the file (with a header line); ``.csv`` as in `read_file`.
    layout: the task's layout; its sentence columns are read, its label column is not.

  Returns:
    (the rows' ids: the ``index`` (or ``id``) column, else 0, 1, ... in file order; the
    examples, with label 0).

  Raises:
    UserInputError: the file is missing, lacks a sentence column or has a short row.
  """
  header, rows, is_csv = _open_rows(path, True, "data.test_path")
  text_a = _TEST_TEXT_A.get(layout.text_a, layout.text_a)
  columns = [_column_index(c, header, path) for c in (text_a, layout.text_b) if c is not None]
  index = next((header.index(c) for c in _INDEX_COLUMNS if c in header), None)
  needed = max(columns + [index or 0]) + 1
  ids, examples = [], []
  for line_number, row in rows:
    _check_width(row, needed, f"{path}:{line_number}", is_csv)
    ids.append(str(len(ids)) if index is None else row[index])
    text_b = None if layout.text_b is None else row[columns[1]]
    examples.append(SentenceExample(row[columns[0]], text_b, 0 if layout.label_names else 0.0))
  return ids, examples


def read_tfds(
  name: str, layout: GlueLayout, *, split: str, data_dir: str = "", max_examples: int = 0
) -> list[SentenceExample]:
  """Reads a labelled split of a locally prepared TFDS GLUE dataset (e.g. "glue/mrpc").

  Raises:
    UserInputError: the dataset is not prepared (with the `tfds build` command), the split
      does not exist or holds no labels (GLUE's test splits), or lacks the task's features.
  """

  def check(builder):
    features = builder.info.features
    wanted = [k for k in (layout.tfds_text_a, layout.tfds_text_b, "label") if k]
    if not set(wanted) <= set(features.keys()):
      raise UserInputError(
        f"TFDS dataset {name!r} has features {sorted(features.keys())}, "
        f"not {wanted}; is it the GLUE task data.glue_task names?"
      )

  _, records = tfds_source.open_split(
    name, split=split, data_dir=data_dir, check=check, max_examples=max_examples
  )
  examples = []
  for record in records:
    label = record["label"]
    if layout.label_names and label < 0:
      raise UserInputError(
        f"TFDS {name}[{split}] has no labels (GLUE test splits do not); "
        "evaluate on 'validation' (MNLI: validation_matched/_mismatched)"
      )
    text_b = record[layout.tfds_text_b].decode("utf-8") if layout.tfds_text_b else None
    examples.append(
      SentenceExample(
        record[layout.tfds_text_a].decode("utf-8"),
        text_b,
        float(label) if not layout.label_names else int(label),
      )
    )
  return examples
