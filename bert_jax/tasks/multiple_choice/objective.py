"""Multiple choice (SWAG): softmax cross-entropy over the scores of an example's choices.

The model (`model`) scores each choice from its pooled [CLS] vector; rows of ``example_weight``
0 (eval padding) count nowhere.
"""

import dataclasses

import jax.numpy as jnp
import numpy as np
import optax

from bert_jax.models.config import ModelConfig
from bert_jax.tasks.multiple_choice.model import BertForMultipleChoice
from bert_jax.tasks.weighted_rows import WeightedRowsTask, encoder_batch


@dataclasses.dataclass(frozen=True)
class MultipleChoiceTask(WeightedRowsTask):
  """Softmax cross-entropy over the C choices of each example."""

  model_config: ModelConfig
  max_seq_length: int
  num_choices: int

  def example_batch(self, batch_size: int):
    """Zero-filled numpy batch with the multiple-choice data's schema."""
    return dict(
      encoder_batch((batch_size, self.num_choices, self.max_seq_length), batch_size),
      labels=np.zeros((batch_size,), np.int32),
    )

  def model(self, deterministic: bool) -> BertForMultipleChoice:
    return BertForMultipleChoice(self.model_config, deterministic=deterministic)

  def loss_and_sums(self, outputs, batch, denominators):
    """Mean cross-entropy over the real examples, and loss / accuracy sums."""
    weights_B = batch["example_weight"].astype(jnp.float32)
    logits_BC = outputs["logits"]
    labels_B = batch["labels"]
    ce_B = optax.softmax_cross_entropy_with_integer_labels(logits_BC, labels_B)
    sums = {
      "loss": jnp.sum(ce_B * weights_B),
      "accuracy": jnp.sum((jnp.argmax(logits_BC, -1) == labels_B) * weights_B),
      "examples": jnp.sum(weights_B),
    }
    return sums["loss"] / denominators["examples"], sums

  def predictions(self, outputs, batch):
    """The choice scores, [B, C]."""
    del batch
    return {"logits": outputs["logits"]}


def make_task(model_config: ModelConfig, data_config, data) -> MultipleChoiceTask:
  """The registry's entry point."""
  del data
  return MultipleChoiceTask(model_config, data_config.max_seq_length, data_config.num_choices)
