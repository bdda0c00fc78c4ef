"""The data slice of a fine-tuning config (tasks classification, tagging, span_qa,
multiple_choice), built once at the settings boundary from the config's ``data`` section.

One dataclass serves the four task types: the common keys say where the examples are and how
they are tokenised; each task reads its own keys below and ignores the others. Every key's
default and description are declared here; `bert_jax.default_config.finetune_config` builds
the ConfigDict's ``data`` section from them.
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
  """Where a fine-tuning task's examples come from and how they become features."""

  train_path: str = option(
    "", help="Local train file: GLUE TSV / CSV, SQuAD JSON, CoNLL columns or SWAG CSV."
  )
  eval_path: str = option("", help="Local eval file of the same format (GLUE: dev.tsv).")
  test_path: str = option(
    "",
    help="classification: unlabelled test file (GLUE test.tsv) predicted at the end of "
    "training into <workdir>/predictions/<TASK>.tsv in the leaderboard's format.",
  )
  write_eval_predictions: bool = option(
    False, help="classification: also write eval predictions to <workdir>/predictions/dev/."
  )
  tfds_name: str = option(
    "",
    help='A TFDS dataset prepared locally ("glue/mrpc", "squad/v1.1", "conll2003"); set = it '
    "replaces the files. Never downloaded.",
  )
  tfds_data_dir: str = option("", help="Its TFDS data folder; empty = TFDS_DATA_DIR.")
  tfds_train_split: str = option("train", help='Its split to train on ("train[:10%]" allowed).')
  tfds_eval_split: str = option(
    "validation", help="Its eval split (MNLI: validation_matched / validation_mismatched)."
  )
  vocab_path: str = option(
    "",
    help="Empty = init_from's vocab.txt, else the vocab its config.json names, else the "
    "embedded one.",
  )
  lowercase: bool | None = option(
    None,
    help="Uncased (True) or cased (False) tokenisation; unset = init_from's setting, else True.",
    config_type=bool,
  )
  max_seq_length: int = option(128, help="Tokens per sequence, [CLS] and [SEP]s included.")
  max_train_examples: int = option(0, help="Read at most this many train examples; 0 = all.")
  max_eval_examples: int = option(0, help="Read at most this many eval examples; 0 = all.")
  glue_task: str = option(
    "",
    help="classification: a GLUE task (cola sst2 mrpc qqp stsb mnli mnli_mismatched qnli rte "
    "wnli) fixing layout, labels and metrics; empty = a custom CSV/TSV with a header.",
  )
  text_a_column: str = option("", help="Custom file: header name of the first sentence.")
  text_b_column: str = option(
    "", help="Custom file: header name of the second sentence; empty = single sentences."
  )
  label_column: str = option("", help="Custom file: header name of the label.")
  label_names: tuple[str, ...] = option(
    (),
    help="Custom classification file: label values in id order (empty = regression on a "
    "float label); tagging: the tag set in id order (empty = the train data's tags, sorted). "
    "On the command line a comma string: label_names=neg,pos.",
  )
  conll_label_column: int = option(-1, help="tagging: CoNLL column holding the tag (-1 = last).")
  doc_stride: int = option(
    128, help="span_qa / tagging: sub-words between starts of overlapping windows."
  )
  max_query_length: int = option(64, help="span_qa: question tokens kept.")
  n_best_size: int = option(20, help="span_qa: start/end candidates per window.")
  max_answer_length: int = option(30, help="span_qa: longest answer, in tokens.")
  version_2_with_negative: bool = option(
    False, help="span_qa: SQuAD v2.0 (questions may have no answer)."
  )
  null_score_diff_threshold: float = option(
    0.0, help='span_qa v2.0: "no answer" when its score beats the best span by more than this.'
  )
  num_choices: int = option(4, help="multiple_choice: endings per example (SWAG: 4).")

  def __post_init__(self):
    object.__setattr__(self, "label_names", label_list(self.label_names))
    if self.lowercase is None:  # Settings resolve it from init_from; built directly: uncased.
      object.__setattr__(self, "lowercase", True)
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
