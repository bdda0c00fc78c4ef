"""The tagging model: every token's encoder output -> the "tagger" head."""

import flax.linen as nn

from bert_jax.models.config import ModelConfig
from bert_jax.models.heads import output_head
from bert_jax.tasks.trunk import trunk


class BertForTokenTagging(nn.Module):
  """BERT with the "tagger" head: dropout, then one dense layer from each token to its labels."""

  config: ModelConfig
  num_labels: int
  deterministic: bool = True

  @nn.compact
  def __call__(self, input_ids_BL, token_type_ids_BL, input_mask_BL):
    """Returns {"logits": float32 [B, L, num_labels]}."""
    x_BLD, _ = trunk(self.config, self.deterministic)(
      input_ids_BL, token_type_ids_BL, input_mask_BL
    )
    return {
      "logits": output_head(
        self.config,
        x_BLD,
        self.num_labels,
        name="tagger",
        dropout=True,
        deterministic=self.deterministic,
      )
    }
