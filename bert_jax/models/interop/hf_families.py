"""Which Hugging Face ``model_type`` each bert_jax family converts to and from.

`tools/convert.py` picks the entry by ``config.json``'s ``model_type`` on import and by
``model.family`` on export; a family that converts adds one entry here.
"""

import dataclasses
from collections.abc import Callable

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models.interop import (
  albert_config,
  albert_weights,
  hf_config,
  hf_distilbert,
  hf_weights,
  transformer_xl_weights,
  xlnet_weights,
)
from bert_jax.models.roberta import hf as roberta_hf
from bert_jax.models.xlm import hf as xlm_hf


@dataclasses.dataclass(frozen=True)
class HfFormat:
  """One family's Hugging Face name tables.

  Attributes:
    family: the bert_jax ``model.family``.
    model_type: ``config.json``'s ``model_type``.
    label: the family's name in messages.
    model_config: (config.json object, source) -> `ModelConfig`.
    config_json: (`ModelConfig`, architecture) -> config.json object.
    rows: `ModelConfig` -> the `weight_table.Row` table.
    params_from_hf: (state dict, `ModelConfig`, source=) -> nested numpy params.
    hf_from_params: (params, `ModelConfig`) -> {Hugging Face name: array}.
    architecture: params -> the ``transformers`` class that loads them.
  """

  family: str
  model_type: str
  label: str
  model_config: Callable
  config_json: Callable
  rows: Callable
  params_from_hf: Callable
  hf_from_params: Callable
  architecture: Callable


def _bert_architecture(params) -> str:
  if "mlm_head" in params:
    return "BertForPreTraining" if "nsp_head" in params else "BertForMaskedLM"
  return "BertModel"


_FORMATS = (
  HfFormat(
    names.BERT,
    "bert",
    "BERT",
    hf_config.model_config_from_bert_config,
    hf_config.bert_config_from_model_config,
    hf_weights.rows,
    hf_weights.params_from_hf,
    hf_weights.hf_from_params,
    _bert_architecture,
  ),
  HfFormat(
    names.DISTILBERT,
    hf_distilbert.MODEL_TYPE,
    "DistilBERT",
    hf_distilbert.model_config,
    hf_distilbert.config_json,
    hf_distilbert.rows,
    hf_distilbert.params_from_hf,
    hf_distilbert.hf_from_params,
    hf_distilbert.architecture,
  ),
  HfFormat(
    names.ALBERT,
    "albert",
    "ALBERT",
    albert_config.model_config_from_albert_config,
    albert_config.albert_config_from_model_config,
    albert_weights.rows,
    albert_weights.params_from_hf,
    albert_weights.hf_from_params,
    albert_weights.architecture,
  ),
  HfFormat(
    names.XLNET,
    "xlnet",
    "XLNet",
    xlnet_weights.model_config_from_xlnet_config,
    xlnet_weights.xlnet_config_from_model_config,
    xlnet_weights.rows,
    xlnet_weights.params_from_hf,
    xlnet_weights.hf_from_params,
    xlnet_weights.architecture,
  ),
  HfFormat(
    names.TRANSFORMER_XL,
    transformer_xl_weights.MODEL_TYPE,
    "Transformer-XL",
    transformer_xl_weights.model_config,
    transformer_xl_weights.config_json,
    transformer_xl_weights.rows,
    transformer_xl_weights.params_from_hf,
    transformer_xl_weights.hf_from_params,
    transformer_xl_weights.architecture,
  ),
  *(
    HfFormat(
      family,
      model_type,
      "RoBERTa",  # XLM-R too: one architecture.
      roberta_hf.model_config,
      roberta_hf.config_json,
      roberta_hf.rows,
      roberta_hf.params_from_hf,
      roberta_hf.hf_from_params,
      roberta_hf.architecture_of(family),
    )
    for family, (model_type, _, _) in roberta_hf.MODEL_TYPES.items()
  ),
  HfFormat(
    names.XLM,
    xlm_hf.MODEL_TYPE,
    "XLM",
    xlm_hf.model_config,
    xlm_hf.config_json,
    xlm_hf.rows,
    xlm_hf.params_from_hf,
    xlm_hf.hf_from_params,
    xlm_hf.architecture,
  ),
)


def _choices() -> str:
  # The model types alone: the whole line must stay readable (the error boundary cuts at 299
  # characters, and the source path comes first). ELECTRA's discriminator + generator
  # directories convert through `hf_electra`.
  return "model_type " + ", ".join([f.model_type for f in _FORMATS] + [names.ELECTRA])


def for_config_json(values, source: str) -> HfFormat:
  """The format of a Hugging Face ``config.json`` object (no ``model_type`` reads as BERT).

  Raises:
    UserInputError: not a JSON object, or a model type no family converts.
  """
  if not isinstance(values, dict):
    raise UserInputError(f"{source} is not a JSON object; pass a Hugging Face config.json")
  model_type = values.get("model_type", "bert")
  for hf_format in _FORMATS:
    if hf_format.model_type == model_type:
      return hf_format
  raise UserInputError(f"{source} describes a {model_type!r} model; convert handles {_choices()}")


def for_family(family: str, source: str) -> HfFormat:
  """The format a workdir of ``model.family=family`` exports to.

  Raises:
    UserInputError: the family has no Hugging Face conversion.
  """
  for hf_format in _FORMATS:
    if hf_format.family == family:
      return hf_format
  raise UserInputError(
    f"{source} holds a model.family={family!r} model; --to=hf exports {_choices()}"
  )
