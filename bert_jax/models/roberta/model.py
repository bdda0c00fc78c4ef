"""RoBERTa's modules (Liu et al. 2019), on BERT's embeddings, encoder and masked-LM head.

What differs from BERT (`models/bert.py`):

- positions are counted past the padding index, as fairseq does: real tokens get
  ``padding_idx + 1, padding_idx + 2, ...`` and padding gets ``padding_idx`` itself, so the table
  has ``max_seq_length + padding_idx + 1`` rows (514 for 512 tokens);
- one segment type: token type ids are ignored (all 0) when ``type_vocab_size`` is 1, so
  sentence-pair features with segment B ids still run;
- the pretrained model (``RobertaForMaskedLM``) has no pooler and no NSP head; fine-tuning heads
  get BERT's ``tanh(dense([CLS]))`` pooler, fresh like the one of Hugging Face's
  ``RobertaClassificationHead``;
- the LM head is BERT's `MaskedLmHead` (dense, GELU, LayerNorm, tied decoder plus a bias).
"""

import flax.linen as nn
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import heads, layers
from bert_jax.models.config import ModelConfig
from bert_jax.models.embeddings import Embeddings
from bert_jax.models.encoder import Encoder

# `<pad>`'s id in RoBERTa's and XLM-R's vocabs, and the position padding gets (fairseq).
PADDING_IDX = 1


def max_length(config: ModelConfig) -> int:
  """The longest sequence ``config``'s position table holds (512 for 514 rows)."""
  return config.max_position_embeddings - PADDING_IDX - 1


def position_ids(input_mask_BL):
  """fairseq's positions: ``PADDING_IDX`` + the count of real tokens so far, on real tokens.

  Padding (``input_mask`` 0) gets ``PADDING_IDX``. Hugging Face finds padding by the pad id;
  the mask says the same for every row the data pipeline builds, and packed documents (mask
  values 1, 2, ...) keep counting, as they do in fairseq's and Hugging Face's models.
  """
  real_BL = (input_mask_BL > 0).astype(jnp.int32)
  return jnp.cumsum(real_BL, axis=1) * real_BL + PADDING_IDX


class RobertaEncoder(nn.Module):
  """Embeddings + BERT encoder stack (+ the pooler when the params or the task have one).

  Attributes:
    config: the model configuration.
    deterministic: disables dropout (evaluation).
    with_pooler: create the pooler; the pretraining model has none.
  """

  config: ModelConfig
  deterministic: bool = True
  with_pooler: bool = True

  def setup(self):
    self.embeddings = Embeddings(self.config, self.deterministic, name="embeddings")
    self.encoder = Encoder(self.config, self.deterministic, name="encoder")
    if self.with_pooler:
      self.pooler = layers.dense(
        self.config, self.config.hidden_size, (names.EMBED, names.MLP), "pooler"
      )

  def __call__(self, input_ids_BL, token_type_ids_BL, input_mask_BL):
    """Encodes a batch (arguments as `BertEncoder`'s).

    Returns:
      (sequence_output [B, L, D], pooled_output [B, D], or None without a pooler).
    """
    length = input_ids_BL.shape[1]
    if length > max_length(self.config):
      raise ValueError(
        f"sequence length {length} exceeds the {max_length(self.config)} positions of "
        f"model.max_position_embeddings={self.config.max_position_embeddings} (RoBERTa "
        f"counts positions from {PADDING_IDX + 1})"
      )
    if self.config.type_vocab_size == 1:
      token_type_ids_BL = jnp.zeros_like(input_ids_BL)
    x_BLD = self.embeddings(input_ids_BL, token_type_ids_BL, position_ids(input_mask_BL))
    x_BLD = self.encoder(x_BLD, input_mask_BL)
    if not heads.pooler_present(self, self.with_pooler):
      return x_BLD, None
    return x_BLD, jnp.tanh(self.pooler(x_BLD[:, 0]))

  def attend(self, x_BPD):
    return self.embeddings.attend(x_BPD)


class RobertaForMaskedLM(heads.MaskedLmModel):
  """RoBERTa with its LM head (at the masked positions only); no pooler, no sentence head."""

  trunk = RobertaEncoder
