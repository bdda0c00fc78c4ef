"""The multiple-choice data of a fine-tuning run: SWAG-format CSV files.

TensorFlow Datasets 4.9.10 has no ``swag`` builder, so ``data.tfds_name`` is refused with a
pointer to the CSV files (SWAG's ``train.csv`` and ``val.csv`` from its GitHub repository).
"""

import numpy as np
from absl import logging

from bert_jax.errors import UserInputError
from bert_jax.tasks.feature_batches import FeatureData
from bert_jax.tasks.finetune_config import FinetuneDataConfig
from bert_jax.tasks.multiple_choice import features as swag_features
from bert_jax.tasks.multiple_choice import reader as swag


class ChoiceData(FeatureData):
  """Train and eval features of a multiple-choice task, and its eval accuracy."""

  def __init__(self, config: FinetuneDataConfig, tokenizer):
    if config.uses_tfds:
      raise UserInputError(
        f"data.tfds_name={config.tfds_name!r}: TensorFlow Datasets has no SWAG builder; "
        "set data.tfds_name='' and data.train_path / data.eval_path to SWAG's train.csv / "
        "val.csv"
      )
    splits = {}
    for split, path, limit in (
      ("train", config.train_path, config.max_train_examples),
      ("eval", config.eval_path, config.max_eval_examples),
    ):
      examples = swag.read_swag_csv(path, num_choices=config.num_choices)[: limit or None]
      splits[split] = swag_features.choice_features(examples, tokenizer, config.max_seq_length)
    self._eval_labels = splits["eval"].labels
    logging.info(
      "multiple choice: %d train / %d eval examples of %d choices",
      len(splits["train"]),
      len(splits["eval"]),
      config.num_choices,
    )
    super().__init__(splits["train"].arrays(), splits["eval"].arrays())

  def eval_metrics(self, predictions):
    """Accuracy of the highest-scoring choice.

    Args:
      predictions: {"logits": float [N_eval, C]}, every eval example in order.
    """
    predicted = np.argmax(np.asarray(predictions["logits"]), axis=-1)
    return {"accuracy": float(np.mean(predicted == self._eval_labels))}


def make_data(config: FinetuneDataConfig, tokenizer) -> ChoiceData:
  """The registry's entry point (`bert_jax.tasks.registry`)."""
  return ChoiceData(config, tokenizer)
