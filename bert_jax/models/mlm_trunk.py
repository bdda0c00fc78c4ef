"""The trunk and pretraining model of the families whose pretrained model is an encoder with a
masked-LM head only (DistilBERT, RoBERTa): no sentence head, and no pooler in their checkpoints.

A family subclasses `MlmTrunk` (its embeddings, how it feeds them, its pooler's activation) and
`MaskedLmModel` (naming that trunk); the parameter names are BERT's (``embeddings``,
``encoder``, ``pooler`` under ``bert``; ``mlm_head``).
"""

import flax.linen as nn
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import layers
from bert_jax.models.config import ModelConfig
from bert_jax.models.embeddings import Embeddings
from bert_jax.models.encoder import Encoder
from bert_jax.models.heads import MaskedLmHead, at_positions


class MlmTrunk(nn.Module):
  """Embeddings + BERT's encoder stack (+ the pooler when the params or the task have one).

  Subclasses set ``embeddings_class`` (a class attribute) and define
  ``embed(input_ids_BL, token_type_ids_BL, input_mask_BL)``, the encoder's input [B, L, D] (the
  family's embeddings of the batch); `pool` is BERT's ``tanh(dense([CLS]))`` unless they
  override it.

  Attributes:
    config: the model configuration.
    deterministic: disables dropout (evaluation).
    with_pooler: create the pooler; the pretraining model has none.
  """

  config: ModelConfig
  deterministic: bool = True
  with_pooler: bool = True
  embeddings_class = Embeddings

  def setup(self):
    config = self.config
    self.embeddings = self.embeddings_class(config, self.deterministic, name="embeddings")
    self.encoder = Encoder(config, self.deterministic, name="encoder")
    if self.with_pooler:
      self.pooler = layers.dense(config, config.hidden_size, (names.EMBED, names.MLP), "pooler")

  def pool(self, first_BD):
    """The pooled output of the first token's state (BERT's tanh pooler)."""
    return jnp.tanh(self.pooler(first_BD))

  def __call__(self, input_ids_BL, token_type_ids_BL, input_mask_BL):
    """Encodes a batch (arguments as `BertEncoder`'s).

    Returns:
      (sequence_output [B, L, D], pooled_output [B, D], or None without a pooler).
    """
    x_BLD = self.embed(input_ids_BL, token_type_ids_BL, input_mask_BL)
    x_BLD = self.encoder(x_BLD, input_mask_BL)
    # Pretrained checkpoints hold no pooler: without its params (tools/embed on one) the pooled
    # output is None; initialisation and fine-tuning create it.
    if not self.with_pooler or not (
      self.is_initializing() or self.has_variable("params", "pooler")
    ):
      return x_BLD, None
    return x_BLD, self.pool(x_BLD[:, 0])

  def attend(self, x_BPD):
    return self.embeddings.attend(x_BPD)


class MaskedLmModel(nn.Module):
  """A trunk with the masked-LM head at the masked positions only: subclasses set ``trunk``
  (a class attribute) to the family's `MlmTrunk`, built here with ``with_pooler=False``."""

  config: ModelConfig
  deterministic: bool = True
  trunk = MlmTrunk

  @nn.compact
  def __call__(self, input_ids_BL, token_type_ids_BL, input_mask_BL, masked_lm_positions_BP=None):
    """Returns float32 ``mlm_logits`` [B, P, V] (every position when positions are None)."""
    bert = self.trunk(self.config, self.deterministic, with_pooler=False, name="bert")
    x_BLD, _ = bert(input_ids_BL, token_type_ids_BL, input_mask_BL)
    x_BPD = at_positions(x_BLD, masked_lm_positions_BP)
    return {"mlm_logits": MaskedLmHead(self.config, name="mlm_head")(x_BPD, bert.attend)}
