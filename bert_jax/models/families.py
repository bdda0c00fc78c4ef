"""Model families: the encoder and the pretraining model that `model.family` names.

A family is a module (or folder) under `models/` built from the shared blocks, plus one entry
here. Everything above the models layer asks this registry for modules instead of importing a
family's classes, so a new family needs no edits in the trainer, the tasks or the tools.
"""

import dataclasses

import flax.linen as nn

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models.albert import AlbertEncoder, AlbertForPreTraining
from bert_jax.models.bert import BertEncoder, BertForPreTraining
from bert_jax.models.distilbert import DistilBertEncoder, DistilBertForMaskedLM
from bert_jax.models.electra import ElectraEncoder, ElectraForPreTraining
from bert_jax.models.roberta.model import RobertaEncoder, RobertaForMaskedLM
from bert_jax.models.transformer_xl import TransformerXLEncoder, TransformerXLLMHeadModel
from bert_jax.models.xlm.model import XlmEncoder, XlmWithLMHead
from bert_jax.models.xlnet import XLNetEncoder, XLNetForPreTraining, XLNetLMHeadModel


@dataclasses.dataclass(frozen=True)
class Family:
  """One model family.

  Attributes:
    name: the `model.family` value (a member of `names.FAMILIES`).
    encoder: module class built as ``encoder(config, deterministic, name=...)`` and called on
      ``(input_ids_BL, token_type_ids_BL, input_mask_BL)``; returns ``(sequence_BLD,
      pooled_BD)``. Fine-tuning task models put their heads on it.
    pretraining_model: module class built as ``pretraining_model(config, deterministic)``;
      its trunk is the ``encoder`` under the scope ``bert`` (`tasks/trunk.py`), so fine-tuning
      restores it from a pretraining checkpoint by that name.
    sentence_head: the pretraining model has the 2-way NSP / SOP head (``nsp_logits``);
      without it the family pretrains with ``data.objective="none"`` only.
    causal_lm_model: module class of the Transformer-XL causal LM (``data.objective='clm'``),
      built like ``pretraining_model`` and called on ``(input_ids_BL, token_type_ids_BL,
      document_ids_BL, memory=[per-layer [B, N, D]], memory_ids_BN=[B, N])``; returns
      ``logits``, the next ``memory`` and its ``memory_ids``. None: no segment memory.
  """

  name: str
  encoder: type[nn.Module]
  pretraining_model: type[nn.Module]
  sentence_head: bool = True
  causal_lm_model: type[nn.Module] | None = None


_FAMILIES = {
  names.BERT: Family(names.BERT, BertEncoder, BertForPreTraining),
  names.ALBERT: Family(names.ALBERT, AlbertEncoder, AlbertForPreTraining),
  names.DISTILBERT: Family(
    names.DISTILBERT, DistilBertEncoder, DistilBertForMaskedLM, sentence_head=False
  ),
  names.ELECTRA: Family(names.ELECTRA, ElectraEncoder, ElectraForPreTraining, sentence_head=False),
  names.XLNET: Family(
    names.XLNET, XLNetEncoder, XLNetForPreTraining, causal_lm_model=XLNetLMHeadModel
  ),
  # Pretrains as a causal LM with memory (data.objective='clm'), not on masked positions.
  names.TRANSFORMER_XL: Family(
    names.TRANSFORMER_XL,
    TransformerXLEncoder,
    TransformerXLLMHeadModel,
    sentence_head=False,
    causal_lm_model=TransformerXLLMHeadModel,
  ),
  # One architecture, two names (as in transformers): XLM-R differs only in its vocab.
  **{
    name: Family(name, RobertaEncoder, RobertaForMaskedLM, sentence_head=False)
    for name in (names.ROBERTA, names.XLM_ROBERTA)
  },
  # MLM, CLM and TLM through tasks/xlm_pretraining.py (its LM head at the predicted positions).
  names.XLM: Family(names.XLM, XlmEncoder, XlmWithLMHead, sentence_head=False),
}


def get(name: str) -> Family:
  """The registered family called ``name``.

  Raises:
    UserInputError: no family has that name.
  """
  if name not in _FAMILIES:
    raise UserInputError(
      f"model.family={name!r} is unknown; choose one of {', '.join(names.FAMILIES)}"
    )
  return _FAMILIES[name]


def registered() -> tuple[str, ...]:
  """Names of the registered families, in registration order."""
  return tuple(_FAMILIES)
