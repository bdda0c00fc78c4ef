"""The data slice of a fine-tuning config (tasks classification, tagging, span_qa,
multiple_choice), built once at the settings boundary from the config's ``data`` section.

One dataclass serves the four task types: the common keys say where the examples are and how
they are tokenised; each task reads its own keys below and ignores the others. Every key is
documented with its default in `bert_jax.default_config.finetune_config`.
"""

import dataclasses

from bert_jax.config_fields import option
from bert_jax.errors import UserInputError
from bert_jax.tasks.classification import reader as glue

# Keys that describe a custom classification file; a GLUE task fixes them itself.
_CUSTOM_FILE_KEYS = ("text_a_column", "text_b_column", "label_column", "label_names")


def label_list(value) -> tuple[str, ...]:
  """``data.label_names`` as a tuple of names, from any way a command line spells it.

  ``--config.data.label_names=neg,pos`` arrives as ``("neg,pos",)``, ``=[neg,pos]`` as
  ``("[neg,pos]",)``, ``='("neg","pos")'`` as ``("neg", "pos")`` and ``=0,1`` as ``(0, 1)``;
  all of them mean the labels neg and pos (or 0 and 1).
  """
  items = (value,) if isinstance(value, str) else tuple(value)
  names = []
  for item in items:
    text = str(item).strip()
    if isinstance(item, str) and len(items) == 1 and text[:1] + text[-1:] in ("[]", "()"):
      text = text[1:-1]
    names += [n.strip() for n in text.split(",")] if isinstance(item, str) else [text]
  return tuple(n for n in names if n)


@dataclasses.dataclass(frozen=True)
class FinetuneDataConfig:
  """Where a fine-tuning task's examples come from and how they become features.

  Attributes:
    train_path: local train file (GLUE TSV / CSV, SQuAD JSON, CoNLL columns, SWAG CSV).
    eval_path: local eval file of the same format.
    test_path: classification: an unlabelled test file (GLUE's test.tsv: an ``index`` column
      and the sentences; a custom CSV/TSV: its sentence columns, ``index`` optional) whose
      predictions the run writes to ``<workdir>/predictions/`` at the end of training, in the
      GLUE leaderboard's format; empty = none.
    write_eval_predictions: classification: also write the eval rows' predictions at every
      eval, to ``<workdir>/predictions/dev/`` (span_qa always writes its prediction files).
    tfds_name: a locally prepared TFDS dataset ("glue/mrpc", "squad/v1.1", "conll2003");
      set = it replaces the local files. Never downloaded.
    tfds_data_dir: its TFDS data folder; empty = TFDS's default (TFDS_DATA_DIR).
    tfds_train_split: its split to train on (slices such as "train[:10%]" allowed).
    tfds_eval_split: its split to evaluate on ("validation"; GLUE MNLI:
      "validation_matched" / "validation_mismatched").
    vocab_path: WordPiece vocab.txt or SentencePiece .model; empty = the init_from directory's
      vocab.txt, else the vocab its config.json names, else the embedded default vocab.
    lowercase: uncased tokenisation (lowercase, strip accents); False for cased models.
    max_seq_length: tokens per sequence, [CLS] and [SEP]s included.
    max_train_examples: read at most this many train examples (the first ones); 0 = all.
    max_eval_examples: read at most this many eval examples (the first ones); 0 = all.
    glue_task: classification: a GLUE task (`bert_jax.data.glue.GLUE_TASKS`), which fixes the
      file layout, the labels and the metrics; empty = a custom file described by the three
      ``*_column`` keys and ``label_names``.
    text_a_column: classification, custom file: header name of the first sentence.
    text_b_column: classification, custom file: header name of the second sentence; empty =
      single sentences.
    label_column: classification, custom file: header name of the label.
    label_names: classification, custom file: the label values in id order (empty =
      regression on a float label); tagging: the tag set in id order (empty = the tags of the
      train data, sorted). On the command line a comma string: ``label_names=neg,pos``.
    conll_label_column: tagging: column of the tag in CoNLL files (-1 = last).
    doc_stride: span_qa and tagging: sub-words between the starts of consecutive windows over
      a document or sentence too long for one sequence (BERT SQuAD: 128).
    max_query_length: span_qa: question tokens kept (BERT: 64).
    n_best_size: span_qa: start and end candidates considered per window (BERT: 20).
    max_answer_length: span_qa: longest answer in tokens (BERT: 30).
    version_2_with_negative: span_qa: SQuAD v2.0 (questions may have no answer).
    null_score_diff_threshold: span_qa, v2.0: predict "no answer" when its score exceeds the
      best span's by more than this.
    num_choices: multiple_choice: endings per example (SWAG: 4).
  """

  train_path: str = ""
  eval_path: str = ""
  test_path: str = option(
    "",
    help="classification: unlabelled test file (GLUE test.tsv) "
    "predicted at the end of training into <workdir>/predictions/",
  )
  write_eval_predictions: bool = option(
    False, help="classification: also write eval predictions to <workdir>/predictions/dev/"
  )
  tfds_name: str = ""
  tfds_data_dir: str = ""
  tfds_train_split: str = "train"
  tfds_eval_split: str = "validation"
  vocab_path: str = ""
  lowercase: bool = True
  max_seq_length: int = 128
  max_train_examples: int = 0
  max_eval_examples: int = 0
  glue_task: str = ""
  text_a_column: str = ""
  text_b_column: str = ""
  label_column: str = ""
  label_names: tuple[str, ...] = ()
  conll_label_column: int = -1
  doc_stride: int = 128
  max_query_length: int = 64
  n_best_size: int = 20
  max_answer_length: int = 30
  version_2_with_negative: bool = False
  null_score_diff_threshold: float = 0.0
  num_choices: int = 4

  def __post_init__(self):
    object.__setattr__(self, "label_names", label_list(self.label_names))
    if self.max_seq_length < 3:
      raise UserInputError(
        f"data.max_seq_length={self.max_seq_length} leaves no room for "
        "[CLS] text [SEP]; use at least 3 (BERT: 128, SQuAD: 384)"
      )
    for key in ("max_train_examples", "max_eval_examples"):
      if getattr(self, key) < 0:
        raise UserInputError(f"data.{key}={getattr(self, key)} must be 0 (all) or a count >= 1")
    for key in (
      "doc_stride",
      "max_query_length",
      "n_best_size",
      "max_answer_length",
      "num_choices",
    ):
      if getattr(self, key) < 1:
        raise UserInputError(f"data.{key}={getattr(self, key)} must be at least 1")
    if self.glue_task:
      glue.glue_layout(self.glue_task)  # Unknown GLUE task names fail here, before any work.
      custom = [k for k in _CUSTOM_FILE_KEYS if getattr(self, k)]
      if custom:
        raise UserInputError(
          f"data.glue_task={self.glue_task!r} fixes the columns and labels, but "
          f"{', '.join('data.' + k for k in custom)} describe a custom file; for your own "
          "CSV/TSV use configs/finetune/classification.py (or pass --config.data.glue_task=)"
        )
    if self.tfds_name and (self.train_path or self.eval_path):
      raise UserInputError(
        f"data.tfds_name={self.tfds_name!r} and data.train_path / data.eval_path are both "
        "set; keep one of the two sources"
      )
    if not self.tfds_name and not (self.train_path and self.eval_path):
      raise UserInputError(
        "fine-tuning needs its examples: set data.train_path and data.eval_path to local "
        "files, or data.tfds_name to a TFDS dataset prepared locally"
      )

  @property
  def uses_tfds(self) -> bool:
    return bool(self.tfds_name)
