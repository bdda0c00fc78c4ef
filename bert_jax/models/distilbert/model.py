"""DistilBERT (Sanh et al. 2019): BERT's post-LN blocks without token types, pooler or NSP.

The layers are BERT's (`models/encoder.py`), so a student can start from every other layer of
a BERT teacher. What differs:

- embeddings: word + position only (no token-type table; token type ids are ignored);
- no pooler in the pretrained model; fine-tuning heads get ``pooled = ReLU(dense([CLS]))``,
  Hugging Face's ``DistilBertForSequenceClassification`` pre-classifier. Its parameters are
  named ``pooler`` so that, as with a BERT checkpoint without a pooler, `train/init_from.py`
  starts it from a fresh init (Hugging Face also initialises ``pre_classifier`` fresh);
- masked LM head of ``DistilBertForMaskedLM``: vocab_transform, GELU, vocab_layer_norm, then
  the tied word table plus a bias, the same computation as BERT's `MaskedLmHead`.
"""

import flax.linen as nn

from bert_jax.models.embeddings import Embeddings, position_ids
from bert_jax.models.mlm_trunk import MaskedLmModel, MlmTrunk


class WordAndPositionEmbeddings(Embeddings):
  """BERT's embeddings without the token-type table (never called, so never created)."""

  def __call__(self, input_ids_BL, position_ids_BL):
    x_BLD = self.word_embeddings(input_ids_BL) + self.position_embeddings(position_ids_BL)
    return self.dropout(self.layer_norm(x_BLD), deterministic=self.deterministic)


class DistilBertEncoder(MlmTrunk):
  """Word + position embeddings + BERT encoder stack (+ the fine-tuning pre-classifier as
  ``pooler``); ``config.type_vocab_size`` is unused."""

  embeddings_class = WordAndPositionEmbeddings

  def embed(self, input_ids_BL, token_type_ids_BL, input_mask_BL):
    """Word + position embeddings; token types are accepted for the common signature, unused
    (DistilBERT has no segment embeddings)."""
    del token_type_ids_BL, input_mask_BL
    return self.embeddings(input_ids_BL, position_ids(self.config, input_ids_BL))

  def pool(self, first_BD):
    """ReLU, not BERT's tanh: Hugging Face's DistilBERT pre-classifier."""
    return nn.relu(self.pooler(first_BD))


class DistilBertForMaskedLM(MaskedLmModel):
  """DistilBERT with the masked-LM head (at the masked positions only); no sentence head."""

  trunk = DistilBertEncoder
