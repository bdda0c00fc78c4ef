"""Hugging Face RoBERTa / XLM-R (``config.json`` and weights) <-> the ``roberta`` families.

The tensors are BERT's (`interop/hf_weights`) under other names: the trunk under ``roberta.``
instead of ``bert.`` (``RobertaModel`` / ``XLMRobertaModel`` checkpoints have no prefix and a
pooler), the LM head ``lm_head.{dense,layer_norm,bias}`` instead of ``cls.predictions.*``, and
no NSP head. The config keys are BERT's (`interop/hf_config`); RoBERTa adds the special ids,
of which the position scheme needs ``pad_token_id`` = `model.PADDING_IDX`.
"""

import dataclasses

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig
from bert_jax.models.interop import hf_config, hf_weights, weight_table
from bert_jax.models.roberta.model import PADDING_IDX

# Hugging Face model_type -> (family, label, class-name stem).
MODEL_TYPES = {
  names.ROBERTA: ("roberta", "RoBERTa", "Roberta"),
  names.XLM_ROBERTA: ("xlm-roberta", "XLM-R", "XLMRoberta"),
}
_PREFIX = "roberta."
_TRUNK_PARTS = ("embeddings.", "encoder.", "pooler.")  # RobertaModel names lack the prefix.
_WORD_TABLE = "roberta.embeddings.word_embeddings.weight"
# BERT's head names -> RoBERTa's (the NSP rows are dropped).
_HEAD_NAMES = {
  "cls.predictions.transform.dense.weight": "lm_head.dense.weight",
  "cls.predictions.transform.dense.bias": "lm_head.dense.bias",
  "cls.predictions.transform.LayerNorm.weight": "lm_head.layer_norm.weight",
  "cls.predictions.transform.LayerNorm.bias": "lm_head.layer_norm.bias",
  "cls.predictions.bias": "lm_head.bias",
}
# The decoder is tied to the word table and its bias to lm_head.bias; .bin files repeat both.
_TIED = {"lm_head.decoder.weight": _WORD_TABLE, "lm_head.decoder.bias": "lm_head.bias"}
# Buffers (0..max_positions-1 and zeros) that some versions of transformers saved.
_IGNORED = ("roberta.embeddings.position_ids", "roberta.embeddings.token_type_ids")
_SPECIAL_IDS = {"bos_token_id": 0, "pad_token_id": PADDING_IDX, "eos_token_id": 2}


def _family(model_type: str) -> str:
  return next(family for family, (theirs, _, _) in MODEL_TYPES.items() if theirs == model_type)


def model_config(values, source: str) -> ModelConfig:
  """The bert_jax model of a ``RobertaConfig`` / ``XLMRobertaConfig`` ``config.json``.

  Raises:
    UserInputError: another pad id (positions count from it), or whatever BERT's config
      reader refuses (activation, position scheme, decoder, sizes).
  """
  pad = values.get("pad_token_id", PADDING_IDX)
  if pad != PADDING_IDX:
    raise UserInputError(
      f"{source} has pad_token_id={pad!r}; bert_jax's RoBERTa counts positions past padding "
      f"index {PADDING_IDX} (fairseq's), so this model's positions would shift"
    )
  family = _family(values["model_type"])
  config = hf_config.model_config_from_bert_config(dict(values, model_type="bert"), source)
  return dataclasses.replace(config, family=family)


def config_json(config: ModelConfig, architecture: str) -> dict:
  """A Hugging Face ``config.json`` object (``RobertaConfig`` / ``XLMRobertaConfig`` keys)."""
  values = hf_config.bert_config_from_model_config(config, architecture)
  return dict(values, model_type=MODEL_TYPES[config.family][0], **_SPECIAL_IDS)


def architecture_of(family: str):
  """params -> the ``transformers`` class of ``family`` that loads them with nothing missing."""
  stem = MODEL_TYPES[family][2]
  return lambda params: f"{stem}ForMaskedLM" if "mlm_head" in params else f"{stem}Model"


def rows(config: ModelConfig):
  """The `Row` table of a RoBERTa of ``config``'s depth (``RobertaForMaskedLM`` names)."""
  table = []
  for row in hf_weights.rows(config):
    if row.group == "nsp_head":
      continue
    theirs = _HEAD_NAMES.get(row.theirs) or row.theirs.replace("bert.", _PREFIX, 1)
    table.append(dataclasses.replace(row, theirs=theirs))
  return table


def _our_shapes(config: ModelConfig) -> dict:
  # The pretraining model (RobertaForMaskedLM) has no pooler; RobertaModel checkpoints do.
  hidden = config.hidden_size
  shapes = dict(weight_table.param_shapes(config))
  shapes.update({"bert/pooler/kernel": (hidden, hidden), "bert/pooler/bias": (hidden,)})
  return shapes


def params_from_hf(state, config: ModelConfig, source: str = "the state dict"):
  """bert_jax params (unscanned) of a ``(XLM)RobertaModel`` / ``...ForMaskedLM`` state dict.

  Returns:
    Nested dict of float32 numpy arrays: ``bert`` (with ``pooler`` if the checkpoint has one),
    plus ``mlm_head`` when it has the LM head.

  Raises:
    UserInputError: tensors are missing, unexpected or of another shape (one message), or a
      tied copy differs from its original.
  """
  tensors = {(_PREFIX + n if n.startswith(_TRUNK_PARTS) else n): v for n, v in state.items()}
  weight_table.fold_tied_copies(tensors, _TIED, source, MODEL_TYPES[config.family][1])
  return weight_table.import_state(
    rows(config),
    tensors,
    config,
    source=source,
    ignored=frozenset(_TIED) | frozenset(_IGNORED),
    our_shapes=_our_shapes(config),
  )


def hf_from_params(params, config: ModelConfig):
  """Hugging Face names -> numpy arrays for the parts ``params`` holds (tied copies left out)."""
  return weight_table.export_params(rows(config), params)
