"""The classification data object: GLUE / custom files or TFDS -> features -> official scores.

Examples come from `reader` (GLUE TSVs, custom CSV/TSV files, or a locally prepared TFDS
``glue/<task>``), become ``[CLS] A [SEP] (B [SEP])`` features in `features`, are batched by the
shared fine-tuning contract (`bert_jax.tasks.feature_batches`) and scored with the layout's
official metrics (`metrics`). With ``data.test_path`` the unlabelled test rows are predicted at
the end of training into the GLUE leaderboard's TSV (`prediction_files`); with
``data.write_eval_predictions`` the eval rows are written likewise to ``dev/<TASK>.tsv``, their
ids being the eval file's row numbers (0, 1, ...).
"""

import numpy as np

from bert_jax.errors import UserInputError
from bert_jax.tasks import feature_batches
from bert_jax.tasks.classification import features, metrics, prediction_files
from bert_jax.tasks.classification import reader as glue


class ClassificationData(feature_batches.FeatureData):
  """GLUE-style train/eval features and the task's official metrics."""

  def __init__(
    self,
    layout: glue.GlueLayout,
    train_examples,
    eval_examples,
    tokenizer,
    max_seq_length: int,
    *,
    test=None,
    file_stem="test",
    write_eval_predictions=False,
  ):
    """Builds the features of every split.

    Args:
      layout: the task's layout.
      train_examples: `reader.SentenceExample` list.
      eval_examples: labelled eval examples.
      tokenizer: the run's tokenizer.
      max_seq_length: tokens per sequence.
      test: (ids, unlabelled examples) of `reader.read_test_file`, or None.
      file_stem: the prediction files' name (`prediction_files.leaderboard_name`).
      write_eval_predictions: `evaluate` also returns ``dev/<file_stem>.tsv``.
    """
    self.layout = layout
    self.file_stem = file_stem
    self.write_eval_predictions = write_eval_predictions
    self.test_ids = test[0] if test else None
    build = lambda examples: (  # pylint: disable=unnecessary-lambda-assignment
      features.sentence_features(examples, tokenizer, max_seq_length) if examples else {}
    )
    super().__init__(build(train_examples), build(eval_examples), build(test[1]) if test else None)

  @property
  def num_labels(self) -> int:
    return self.layout.num_labels

  def eval_metrics(self, predictions):
    """The layout's metrics from ``{"logits": [N, C]}`` (C = 1: regression scores)."""
    logits = predictions["logits"]
    predicted = logits[:, 0] if self.num_labels == 1 else np.argmax(logits, -1)
    return metrics.compute(self.layout.metrics, self.eval_arrays["labels"], predicted)

  def evaluate(self, predictions):
    """`eval_metrics`, and ``dev/<TASK>.tsv`` if ``data.write_eval_predictions``."""
    files = {}
    if self.write_eval_predictions:
      ids = [str(i) for i in range(self.num_eval_examples)]
      files[f"dev/{self.file_stem}.tsv"] = prediction_files.predictions_tsv(
        ids, prediction_files.predicted_labels(self.layout, predictions["logits"])
      )
    return self.eval_metrics(predictions), files

  def test_prediction_files(self, predictions):
    """``{"<TASK>.tsv": the leaderboard TSV}`` of the test rows' ``{"logits": [N, C]}``."""
    return {
      f"{self.file_stem}.tsv": prediction_files.predictions_tsv(
        self.test_ids, prediction_files.predicted_labels(self.layout, predictions["logits"])
      )
    }


def _read(config, layout, split):
  limit = getattr(config, f"max_{split}_examples")
  if config.uses_tfds:
    return glue.read_tfds(
      config.tfds_name,
      layout,
      split=getattr(config, f"tfds_{split}_split"),
      data_dir=config.tfds_data_dir,
      max_examples=limit,
    )
  return glue.read_file(getattr(config, f"{split}_path"), layout, max_examples=limit)


def make_data(config, tokenizer) -> ClassificationData:
  """Reads, tokenises and batches a classification task (registry entry point).

  Args:
    config: `bert_jax.tasks.finetune_config.FinetuneDataConfig`.
    tokenizer: the run's tokenizer.

  Raises:
    UserInputError: unknown GLUE task, missing or malformed files, unprepared TFDS data, a
      custom file without its columns, or a split without examples.
  """
  if config.glue_task:
    layout = glue.glue_layout(config.glue_task)
  else:
    layout = glue.custom_layout(
      config.text_a_column, config.text_b_column, config.label_column, config.label_names
    )
    if config.uses_tfds:
      raise UserInputError(
        "data.tfds_name needs data.glue_task (the GLUE task it holds); "
        "custom files are read from data.train_path / data.eval_path"
      )
  test = glue.read_test_file(config.test_path, layout) if config.test_path else None
  return ClassificationData(
    layout,
    _read(config, layout, "train"),
    _read(config, layout, "eval"),
    tokenizer,
    config.max_seq_length,
    test=test,
    file_stem=prediction_files.leaderboard_name(config.glue_task, config.test_path),
    write_eval_predictions=config.write_eval_predictions,
  )
