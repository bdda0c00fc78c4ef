"""BERT: the encoder, its pooler, and the pretraining heads (masked LM and next sentence)."""

import flax.linen as nn
import jax.numpy as jnp

from bert_jax.models import heads, layers, span_boundary
from bert_jax.models.config import ModelConfig
from bert_jax.models.embeddings import Embeddings, position_ids
from bert_jax.models.encoder import Encoder
from bert_jax.models.heads import MaskedLmHead


class BertEncoder(nn.Module):
  """Embeddings + Transformer encoder + pooler; the trunk every task model shares.

  Attributes:
    config: the model configuration.
    deterministic: disables dropout (evaluation).
  """

  config: ModelConfig
  deterministic: bool = True

  def setup(self):
    self.embeddings = Embeddings(self.config, self.deterministic, name="embeddings")
    self.encoder = Encoder(self.config, self.deterministic, name="encoder")
    self.pooler = layers.dense(self.config, self.config.hidden_size, ("embed", "mlp"), "pooler")

  def __call__(self, input_ids_BL, token_type_ids_BL, input_mask_BL):
    """Encodes a batch.

    Args:
      input_ids_BL: int token ids [batch, length].
      token_type_ids_BL: int segment A/B ids [batch, length].
      input_mask_BL: int [batch, length]; 0 marks padding, positive values are document ids
        (tokens attend only within their document, so packed rows stay separate).

    Returns:
      (sequence_output [B, L, D], pooled_output [B, D]) in the compute dtype.
    """
    position_ids_BL = position_ids(self.config, input_ids_BL)
    x_BLD = self.embeddings(input_ids_BL, token_type_ids_BL, position_ids_BL)
    x_BLD = self.encoder(x_BLD, input_mask_BL)
    pooled_BD = jnp.tanh(self.pooler(x_BLD[:, 0]))
    return x_BLD, pooled_BD

  def attend(self, x_BPD):
    return self.embeddings.attend(x_BPD)


class BertForPreTraining(nn.Module):
  """BERT with the masked-LM head (at the masked positions only) and the NSP head."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, input_ids_BL, token_type_ids_BL, input_mask_BL, masked_lm_positions_BP=None):
    """Returns float32 ``mlm_logits`` [B, P, V] and ``nsp_logits`` [B, 2].

    Args:
      input_ids_BL: int token ids.
      token_type_ids_BL: int segment ids.
      input_mask_BL: int padding / document mask (see `BertEncoder`).
      masked_lm_positions_BP: int positions to predict; None predicts every position, which
        the original BERT never does in training (the vocabulary projection dominates the cost
        at small widths) but is handy for inspection and equivalence tests.
    """
    bert = BertEncoder(self.config, self.deterministic, name="bert")
    x_BLD, pooled_BD = bert(input_ids_BL, token_type_ids_BL, input_mask_BL)
    x_BPD = heads.at_positions(x_BLD, masked_lm_positions_BP)
    mlm_logits_BPV = MaskedLmHead(self.config, name="mlm_head")(x_BPD, bert.attend)
    nsp_logits_B2 = layers.dense(self.config, 2, ("mlp", "classes"), "nsp_head")(pooled_BD)
    outputs = {"mlm_logits": mlm_logits_BPV, "nsp_logits": nsp_logits_B2.astype(jnp.float32)}
    return span_boundary.add_logits(
      self.config, outputs, x_BLD, masked_lm_positions_BP, bert.attend
    )
