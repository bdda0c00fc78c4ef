"""Sentence (pair) classification and regression data: GLUE files / TFDS -> batched features.

Features are ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` token ids through the data
system's tokenizer (WordPiece or SentencePiece), segment ids 0 on A and 1 on B. A pair longer
than ``max_seq_length - 3`` tokens loses tokens from the end of its longer sentence, one at a
time (B on ties), as BERT's ``run_classifier`` does; a single sentence is cut to
``max_seq_length - 2``.
"""

import numpy as np

from bert_jax.errors import UserInputError
from bert_jax.tasks import feature_batches
from bert_jax.tasks.classification import metrics
from bert_jax.tasks.classification import reader as glue


def _truncate_pair(ids_a, ids_b, max_tokens):
  """Shortens the longer list (B on ties) from the end until both fit in ``max_tokens``."""
  ids_a, ids_b = list(ids_a), list(ids_b)
  while len(ids_a) + len(ids_b) > max_tokens:
    (ids_a if len(ids_a) > len(ids_b) else ids_b).pop()
  return ids_a, ids_b


def sentence_features(examples, tokenizer, max_seq_length):
  """Model inputs and labels of sentence or sentence-pair examples.

  Args:
    examples: `glue.SentenceExample` list (all single sentences, or all pairs).
    tokenizer: a tokenizer of `bert_jax.data.tokenization`.
    max_seq_length: L, [CLS] and [SEP]s included.

  Returns:
    {"input_ids", "token_type_ids", "input_mask": int32 [N, L], "labels": int32 [N] (or
    float32 [N] for float labels)}.
  """
  special = tokenizer.special_ids
  ids_a = tokenizer.encode_batch([e.text_a for e in examples])
  pairs = examples[0].text_b is not None
  ids_b = tokenizer.encode_batch([e.text_b for e in examples]) if pairs else None
  input_ids = np.full((len(examples), max_seq_length), special.pad, np.int32)
  token_type_ids = np.zeros((len(examples), max_seq_length), np.int32)
  for row in range(len(examples)):
    if pairs:
      a, b = _truncate_pair(ids_a[row], ids_b[row], max_seq_length - 3)
      tokens = [special.cls, *a, special.sep, *b, special.sep]
      token_type_ids[row, len(a) + 2:len(tokens)] = 1
    else:
      tokens = [special.cls, *ids_a[row][:max_seq_length - 2], special.sep]
    input_ids[row, :len(tokens)] = tokens
  labels = np.array([e.label for e in examples])
  return {"input_ids": input_ids, "token_type_ids": token_type_ids,
          "input_mask": (input_ids != special.pad).astype(np.int32),
          "labels": labels.astype(np.float32 if labels.dtype.kind == "f" else np.int32)}


class ClassificationData(feature_batches.FeatureData):
  """GLUE-style train/eval features and the task's official metrics."""

  def __init__(self, layout: glue.GlueLayout, train_examples, eval_examples, tokenizer,
               max_seq_length: int):
    self.layout = layout
    super().__init__(
        sentence_features(train_examples, tokenizer, max_seq_length) if train_examples else {},
        sentence_features(eval_examples, tokenizer, max_seq_length) if eval_examples else {})

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
