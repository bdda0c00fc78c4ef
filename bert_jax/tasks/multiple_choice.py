"""Multiple choice (SWAG): one score per choice from the pooled [CLS] vector, softmax over choices.

The C choices of an example are encoded as C independent rows ([B, C, L] -> [B*C, L]); the
"choice_head" (dropout, then a dense layer to one score) is the only new parameter, as in the
BERT paper (section 4.4).
"""

import dataclasses

import flax.linen as nn
import jax.numpy as jnp
import numpy as np
import optax

from bert_jax.models import layers
from bert_jax.models.bert import BertEncoder
from bert_jax.models.config import ModelConfig
from bert_jax.models.dropout import Dropout
from bert_jax.tasks.weighted_rows import WeightedRowsTask, encoder_batch


class BertForMultipleChoice(nn.Module):
  """BERT scoring each choice row; the scores of an example's choices are its logits."""
  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, input_ids_BCL, token_type_ids_BCL, input_mask_BCL):
    """Returns {"logits": float32 [B, C]}."""
    batch, choices, length = input_ids_BCL.shape
    flat = lambda x: x.reshape(batch * choices, length)  # pylint: disable=unnecessary-lambda-assignment
    _, pooled_ND = BertEncoder(self.config, self.deterministic, name="bert")(
        flat(input_ids_BCL), flat(token_type_ids_BCL), flat(input_mask_BCL))
    pooled_ND = Dropout(self.config.hidden_dropout_rate)(pooled_ND, self.deterministic)
    scores_N1 = layers.dense(self.config, 1, ("embed", "classes"), "choice_head")(pooled_ND)
    return {"logits": scores_N1.reshape(batch, choices).astype(jnp.float32)}


@dataclasses.dataclass(frozen=True)
class MultipleChoiceTask(WeightedRowsTask):
  """Softmax cross-entropy over the C choices of each example."""
  model_config: ModelConfig
  max_seq_length: int
  num_choices: int

  def example_batch(self, batch_size: int):
    """Zero-filled numpy batch with the multiple-choice data's schema."""
    return dict(encoder_batch((batch_size, self.num_choices, self.max_seq_length), batch_size),
                labels=np.zeros((batch_size,), np.int32))

  def model(self, deterministic: bool) -> BertForMultipleChoice:
    return BertForMultipleChoice(self.model_config, deterministic=deterministic)

  def loss_and_sums(self, outputs, batch, denominators):
    """Mean cross-entropy over the real examples, and loss / accuracy sums."""
    weights_B = batch["example_weight"].astype(jnp.float32)
    logits_BC = outputs["logits"]
    labels_B = batch["labels"]
    ce_B = optax.softmax_cross_entropy_with_integer_labels(logits_BC, labels_B)
    sums = {"loss": jnp.sum(ce_B * weights_B),
            "accuracy": jnp.sum((jnp.argmax(logits_BC, -1) == labels_B) * weights_B),
            "examples": jnp.sum(weights_B)}
    return sums["loss"] / denominators["examples"], sums

  def predictions(self, outputs, batch):
    """The choice scores, [B, C]."""
    del batch
    return {"logits": outputs["logits"]}


def make_task(model_config: ModelConfig, data_config, data) -> MultipleChoiceTask:
  """The registry's entry point."""
  del data
  return MultipleChoiceTask(model_config, data_config.max_seq_length, data_config.num_choices)
