"""The span QA model: every token's encoder output -> a start and an end logit."""

import flax.linen as nn

from bert_jax.models.config import ModelConfig
from bert_jax.models.heads import output_head
from bert_jax.tasks.trunk import trunk


class BertForSpanQa(nn.Module):
  """BERT with the "qa_outputs" head: one dense layer from each token to a start and an end
  logit (no dropout before it, as the original BERT's SQuAD model)."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, input_ids_BL, token_type_ids_BL, input_mask_BL):
    """Returns float32 {"start_logits": [B, L], "end_logits": [B, L]}."""
    x_BLD, _ = trunk(self.config, self.deterministic)(
      input_ids_BL, token_type_ids_BL, input_mask_BL
    )
    logits_BL2 = output_head(
      self.config, x_BLD, 2, name="qa_outputs", dropout=False, deterministic=self.deterministic
    )
    return {"start_logits": logits_BL2[:, :, 0], "end_logits": logits_BL2[:, :, 1]}
