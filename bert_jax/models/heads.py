"""Sequence-level task heads on the shared encoder (GLUE classification and regression)."""

import flax.linen as nn
import jax.numpy as jnp

from bert_jax.models import layers
from bert_jax.models.bert import BertEncoder
from bert_jax.models.config import ModelConfig
from bert_jax.models.dropout import Dropout


class BertForSequenceClassification(nn.Module):
  """BERT with the "classifier" head: dropout, then a dense layer on the pooled [CLS] output.

  Attributes:
    config: the model configuration (the head's dropout is ``hidden_dropout_rate``).
    num_labels: outputs; 1 makes the head a regressor (one score per example).
    deterministic: disables dropout (evaluation).
  """
  config: ModelConfig
  num_labels: int
  deterministic: bool = True

  @nn.compact
  def __call__(self, input_ids_BL, token_type_ids_BL, input_mask_BL):
    """Returns {"logits": float32 [B, num_labels]}."""
    _, pooled_BD = BertEncoder(self.config, self.deterministic, name="bert")(
        input_ids_BL, token_type_ids_BL, input_mask_BL)
    pooled_BD = Dropout(self.config.hidden_dropout_rate)(pooled_BD, self.deterministic)
    logits_BC = layers.dense(self.config, self.num_labels, ("embed", "classes"),
                             "classifier")(pooled_BD)
    return {"logits": logits_BC.astype(jnp.float32)}
