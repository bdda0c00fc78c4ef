"""The token-classification data of a fine-tuning run: CoNLL files or TFDS ``conll2003``.

Sentences are read once (`reader`), turned into first-sub-word features with windows over long
sentences (`features`), and batched by the shared fine-tuning contract
(`bert_jax.tasks.feature_batches`). Eval predictions are mapped back to one label per word of
every eval sentence and scored with seqeval (`metrics`).
"""

import numpy as np
from absl import logging

from bert_jax.errors import UserInputError
from bert_jax.tasks.feature_batches import FeatureData
from bert_jax.tasks.finetune_config import FinetuneDataConfig
from bert_jax.tasks.tagging import features as conll_features
from bert_jax.tasks.tagging import metrics as tagging_metrics
from bert_jax.tasks.tagging import reader as conll


def _read_split(config: FinetuneDataConfig, split):
  """``(sentences, label names the source fixes or ())`` of "train" or "eval"."""
  limit = config.max_train_examples if split == "train" else config.max_eval_examples
  if config.uses_tfds:
    tfds_split = config.tfds_train_split if split == "train" else config.tfds_eval_split
    sentences, names = conll.read_tfds(
      config.tfds_name,
      split=tfds_split,
      label_column=config.conll_label_column,
      data_dir=config.tfds_data_dir,
    )
  else:
    path = config.train_path if split == "train" else config.eval_path
    sentences, names = conll.read_conll(path, label_column=config.conll_label_column), ()
  return sentences[: limit or None], names


class TaggingData(FeatureData):
  """Train and eval features of a tagging task, and its word-level eval metrics.

  Attributes:
    label_names: the tag set in id order (the head's output size).
    eval_sentences: the eval sentences, in order; metrics score each of their words.
  """

  def __init__(self, config: FinetuneDataConfig, tokenizer):
    train_sentences, source_names = _read_split(config, "train")
    self.eval_sentences, _ = _read_split(config, "eval")
    self.label_names = conll.label_vocabulary(train_sentences, config.label_names or source_names)
    unknown = sorted(
      {label for s in self.eval_sentences for label in s.labels} - set(self.label_names)
    )
    if unknown:
      raise UserInputError(
        f"eval labels {unknown} are not among the labels {list(self.label_names)}; list "
        "every tag in data.label_names (id order) so the head can predict them"
      )
    self._entity_level = tagging_metrics.is_chunk_tagset(self.label_names)
    build = lambda sentences: conll_features.tagging_features(  # pylint: disable=unnecessary-lambda-assignment
      sentences, self.label_names, tokenizer, config.max_seq_length, config.doc_stride
    )
    train_features = build(train_sentences)
    self._eval_features = build(self.eval_sentences)
    logging.info(
      "tagging: %d labels; %d train sentences -> %d features, %d eval -> %d",
      len(self.label_names),
      len(train_sentences),
      len(train_features),
      len(self.eval_sentences),
      len(self._eval_features),
    )
    super().__init__(train_features.arrays(), self._eval_features.arrays())

  def eval_metrics(self, predictions):
    """Entity precision / recall / F1 (chunk tag sets) and word accuracy over the eval words.

    Args:
      predictions: {"label_ids": int [F_eval, L]}, every eval feature in order.
    """
    per_word = conll_features.word_predictions(
      self._eval_features,
      np.asarray(predictions["label_ids"]),
      [len(s.words) for s in self.eval_sentences],
    )
    predicted = [[self.label_names[i] for i in ids] for ids in per_word]
    true = [list(s.labels) for s in self.eval_sentences]
    return tagging_metrics.tagging_metrics(true, predicted, entity_level=self._entity_level)


def make_data(config: FinetuneDataConfig, tokenizer) -> TaggingData:
  """The registry's entry point (`bert_jax.tasks.registry`)."""
  return TaggingData(config, tokenizer)
