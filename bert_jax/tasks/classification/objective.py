"""Sequence classification (softmax cross-entropy) and regression (mean squared error).

One task serves both: ``num_labels`` 1 is regression on float ``labels`` (GLUE STS-B), more is
classification on int ``labels``. Rows of ``example_weight`` 0 (eval padding) count nowhere.
"""

import dataclasses

import jax.numpy as jnp
import numpy as np
import optax

from bert_jax.models.config import ModelConfig
from bert_jax.tasks.classification.model import BertForSequenceClassification
from bert_jax.tasks.weighted_rows import WeightedRowsTask, encoder_batch


@dataclasses.dataclass(frozen=True)
class ClassificationTask(WeightedRowsTask):
  """Sentence (pair) classification over ``num_labels`` classes, or regression if 1."""

  model_config: ModelConfig
  max_seq_length: int
  num_labels: int

  @property
  def is_regression(self) -> bool:
    return self.num_labels == 1

  def example_batch(self, batch_size: int):
    """Zero-filled numpy batch with the classification data's schema."""
    return dict(
      encoder_batch((batch_size, self.max_seq_length), batch_size),
      labels=np.zeros((batch_size,), np.float32 if self.is_regression else np.int32),
    )

  def model(self, deterministic: bool) -> BertForSequenceClassification:
    return BertForSequenceClassification(
      self.model_config, self.num_labels, deterministic=deterministic
    )

  def loss_and_sums(self, outputs, batch, denominators):
    """Mean loss over real rows, and loss / accuracy (or squared error) sums."""
    weights_B = batch["example_weight"].astype(jnp.float32)
    logits_BC = outputs["logits"]
    labels_B = batch["labels"]
    sums = {"examples": jnp.sum(weights_B)}
    if self.is_regression:
      loss_B = jnp.square(logits_BC[:, 0] - labels_B.astype(jnp.float32))
    else:
      loss_B = optax.softmax_cross_entropy_with_integer_labels(logits_BC, labels_B)
      sums["accuracy"] = jnp.sum((jnp.argmax(logits_BC, -1) == labels_B) * weights_B)
    sums["loss"] = jnp.sum(loss_B * weights_B)
    return sums["loss"] / denominators["examples"], sums

  def predictions(self, outputs, batch):
    """The logits (regression: the score in column 0) of every row, [B, num_labels]."""
    del batch
    return {"logits": outputs["logits"]}


def make_task(model_config: ModelConfig, data_config, data) -> ClassificationTask:
  """Registry entry point: the head is sized by the data's label count."""
  return ClassificationTask(model_config, data_config.max_seq_length, data.num_labels)
