"""RoBERTa's modules (Liu et al. 2019), on BERT's embeddings, encoder and masked-LM head.

What differs from BERT (`models/bert.py`):

- positions are counted past the padding index (``model.roberta.padding_idx``, Hugging Face's
  ``pad_token_id``: fairseq's 1 unless a checkpoint says otherwise), as fairseq and transformers
  do: real tokens get ``padding_idx + 1, padding_idx + 2, ...`` and padding gets
  ``padding_idx`` itself, so the table has ``max_seq_length + padding_idx + 1`` rows (514 for
  512 tokens);
- one segment type: token type ids are ignored (all 0) when ``type_vocab_size`` is 1, so
  sentence-pair features with segment B ids still run;
- the pretrained model (``RobertaForMaskedLM``) has no pooler and no NSP head; fine-tuning heads
  get BERT's ``tanh(dense([CLS]))`` pooler, fresh like the one of Hugging Face's
  ``RobertaClassificationHead``;
- the LM head is BERT's `MaskedLmHead` (dense, GELU, LayerNorm, tied decoder plus a bias).
"""

import jax.numpy as jnp

from bert_jax.models.config import ModelConfig
from bert_jax.models.mlm_trunk import MaskedLmModel, MlmTrunk


def max_length(config: ModelConfig) -> int:
  """The longest sequence ``config``'s position table holds (512 for 514 rows and index 1)."""
  return config.max_position_embeddings - config.roberta.padding_idx - 1


def position_ids(input_mask_BL, padding_idx: int):
  """fairseq's positions: ``padding_idx`` + the count of real tokens so far, on real tokens.

  Padding (``input_mask`` 0) gets ``padding_idx``. Hugging Face finds padding by the pad id;
  the mask says the same for every row the data pipeline builds, and packed documents (mask
  values 1, 2, ...) keep counting, as they do in fairseq's and Hugging Face's models.
  """
  real_BL = (input_mask_BL > 0).astype(jnp.int32)
  return jnp.cumsum(real_BL, axis=1) * real_BL + padding_idx


class RobertaEncoder(MlmTrunk):
  """Embeddings (positions past the padding index) + BERT encoder stack (+ the pooler when the
  params or the task have one)."""

  def embed(self, input_ids_BL, token_type_ids_BL, input_mask_BL):
    """RoBERTa's embeddings of the batch: fairseq's positions, one segment type."""
    length = input_ids_BL.shape[1]
    if length > max_length(self.config):
      raise ValueError(
        f"sequence length {length} exceeds the {max_length(self.config)} positions of "
        f"model.max_position_embeddings={self.config.max_position_embeddings} (RoBERTa "
        f"counts positions from model.roberta.padding_idx + 1 = "
        f"{self.config.roberta.padding_idx + 1})"
      )
    if self.config.type_vocab_size == 1:
      token_type_ids_BL = jnp.zeros_like(input_ids_BL)
    return self.embeddings(
      input_ids_BL, token_type_ids_BL, position_ids(input_mask_BL, self.config.roberta.padding_idx)
    )


class RobertaForMaskedLM(MaskedLmModel):
  """RoBERTa with its LM head (at the masked positions only); no pooler, no sentence head."""

  trunk = RobertaEncoder
