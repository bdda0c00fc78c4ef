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

from bert_jax import names
from bert_jax.models import heads, layers
from bert_jax.models.config import ModelConfig
from bert_jax.models.embeddings import Embeddings, position_ids
from bert_jax.models.encoder import Encoder


class WordAndPositionEmbeddings(Embeddings):
  """BERT's embeddings without the token-type table (never called, so never created)."""

  def __call__(self, input_ids_BL, position_ids_BL):
    x_BLD = self.word_embeddings(input_ids_BL) + self.position_embeddings(position_ids_BL)
    return self.dropout(self.layer_norm(x_BLD), deterministic=self.deterministic)


class DistilBertEncoder(nn.Module):
  """Embeddings + BERT encoder stack (+ the fine-tuning pre-classifier as ``pooler``).

  Attributes:
    config: the model configuration (``type_vocab_size`` is unused).
    deterministic: disables dropout (evaluation).
    with_pooler: compute the pooled [CLS] vector; the pretraining model has no pooler.
  """

  config: ModelConfig
  deterministic: bool = True
  with_pooler: bool = True

  def setup(self):
    self.embeddings = WordAndPositionEmbeddings(self.config, self.deterministic, name="embeddings")
    self.encoder = Encoder(self.config, self.deterministic, name="encoder")
    if self.with_pooler:
      self.pooler = layers.dense(
        self.config, self.config.hidden_size, (names.EMBED, names.MLP), "pooler"
      )

  def __call__(self, input_ids_BL, token_type_ids_BL, input_mask_BL):
    """Encodes a batch; ``token_type_ids_BL`` is accepted for the common signature, unused.

    Returns:
      (sequence_output [B, L, D], pooled_output [B, D] or None without the pooler).
    """
    del token_type_ids_BL  # DistilBERT has no segment embeddings.
    position_ids_BL = position_ids(self.config, input_ids_BL)
    x_BLD = self.embeddings(input_ids_BL, position_ids_BL)
    x_BLD = self.encoder(x_BLD, input_mask_BL)
    if not heads.pooler_present(self, self.with_pooler):
      return x_BLD, None
    # ReLU, not BERT's tanh: Hugging Face's DistilBERT pre-classifier.
    return x_BLD, nn.relu(self.pooler(x_BLD[:, 0]))

  def attend(self, x_BPD):
    return self.embeddings.attend(x_BPD)


class DistilBertForMaskedLM(heads.MaskedLmModel):
  """DistilBERT with the masked-LM head (at the masked positions only); no sentence head."""

  trunk = DistilBertEncoder
