"""The classification model: the encoder's pooled [CLS] vector -> the "classifier" head."""

import flax.linen as nn

from bert_jax.models.config import ModelConfig
from bert_jax.models.heads import output_head
from bert_jax.tasks.trunk import trunk


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
    _, pooled_BD = trunk(self.config, self.deterministic)(
      input_ids_BL, token_type_ids_BL, input_mask_BL
    )
    return {
      "logits": output_head(
        self.config,
        pooled_BD,
        self.num_labels,
        name="classifier",
        dropout=True,
        deterministic=self.deterministic,
      )
    }
