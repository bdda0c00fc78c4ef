"""The multiple-choice model: each choice row's pooled [CLS] vector -> one score.

The C choices of an example are encoded as C independent rows ([B, C, L] -> [B*C, L]); the
"choice_head" (dropout, then a dense layer to one score) is the only new parameter, as in the
BERT paper (section 4.4).
"""

import flax.linen as nn

from bert_jax.models.config import ModelConfig
from bert_jax.models.heads import output_head
from bert_jax.tasks.trunk import trunk


class BertForMultipleChoice(nn.Module):
  """BERT scoring each choice row; the scores of an example's choices are its logits."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, input_ids_BCL, token_type_ids_BCL, input_mask_BCL):
    """Returns {"logits": float32 [B, C]}."""
    batch, choices, length = input_ids_BCL.shape
    flat = lambda x: x.reshape(batch * choices, length)  # pylint: disable=unnecessary-lambda-assignment
    _, pooled_ND = trunk(self.config, self.deterministic)(
      flat(input_ids_BCL), flat(token_type_ids_BCL), flat(input_mask_BCL)
    )
    scores_N1 = output_head(
      self.config, pooled_ND, 1, name="choice_head", dropout=True, deterministic=self.deterministic
    )
    return {"logits": scores_N1.reshape(batch, choices)}
