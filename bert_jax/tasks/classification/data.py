"""The classification data object: GLUE / custom files or TFDS -> features -> official scores.

Examples come from `reader` (GLUE TSVs, custom CSV/TSV files, or a locally prepared TFDS
``glue/<task>``), become ``[CLS] A [SEP] (B [SEP])`` features in `features`, are batched by the
shared fine-tuning contract (`bert_jax.tasks.feature_batches`) and scored with the layout's
official metrics (`metrics`).
"""

import numpy as np

from bert_jax.errors import UserInputError
from bert_jax.tasks import feature_batches
from bert_jax.tasks.classification import features, metrics
from bert_jax.tasks.classification import reader as glue


class ClassificationData(feature_batches.FeatureData):
  """GLUE-style train/eval features and the task's official metrics."""

  def __init__(self, layout: glue.GlueLayout, train_examples, eval_examples, tokenizer,
               max_seq_length: int):
    self.layout = layout
    build = lambda examples: (  # pylint: disable=unnecessary-lambda-assignment
        features.sentence_features(examples, tokenizer, max_seq_length) if examples else {})
    super().__init__(build(train_examples), build(eval_examples))

  @property
  def num_labels(self) -> int:
    return self.layout.num_labels

  def eval_metrics(self, predictions):
    """The layout's metrics from ``{"logits": [N, C]}`` (C = 1: regression scores)."""
    logits = predictions["logits"]
    predicted = logits[:, 0] if self.num_labels == 1 else np.argmax(logits, -1)
    return metrics.compute(self.layout.metrics, self.eval_arrays["labels"], predicted)


def _read(config, layout, split):
  limit = getattr(config, f"max_{split}_examples")
  if config.uses_tfds:
    return glue.read_tfds(config.tfds_name, layout,
                          split=getattr(config, f"tfds_{split}_split"),
                          data_dir=config.tfds_data_dir, max_examples=limit)
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
    layout = glue.custom_layout(config.text_a_column, config.text_b_column,
                                config.label_column, config.label_names)
    if config.uses_tfds:
      raise UserInputError("data.tfds_name needs data.glue_task (the GLUE task it holds); "
                           "custom files are read from data.train_path / data.eval_path")
  return ClassificationData(layout, _read(config, layout, "train"),
                            _read(config, layout, "eval"), tokenizer, config.max_seq_length)
