"""Hugging Face RoBERTa / XLM-R (``config.json`` and weights) <-> the ``roberta`` families.

The tensors are BERT's (`interop/hf_weights`) under other names: the trunk under ``roberta.``
instead of ``bert.`` (``RobertaModel`` / ``XLMRobertaModel`` checkpoints have no prefix and a
pooler), the LM head ``lm_head.{dense,layer_norm,bias}`` instead of ``cls.predictions.*``, and
no NSP head. The config keys are BERT's (`interop/hf_config`); RoBERTa adds the special ids,
of which ``pad_token_id`` is ``model.roberta.padding_idx``, the index positions count past.
"""

import dataclasses
import functools

from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig
from bert_jax.models.family_spec import HfInterop, table_interop
from bert_jax.models.interop import hf_config, hf_weights, weight_table
from bert_jax.models.interop.hf_state import HfState
from bert_jax.models.roberta.model import RobertaForMaskedLM
from bert_jax.models.roberta.options import RobertaOptions

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
_SPECIAL_IDS = {"bos_token_id": 0, "eos_token_id": 2}  # fairseq's; pad_token_id is the model's.


def interop(family: str, model_type: str, label: str, stem: str) -> HfInterop:
  """The `HfInterop` of one of the two families of this architecture.

  Args:
    family: its ``model.family``.
    model_type: its ``config.json`` ``model_type`` ("roberta", "xlm-roberta").
    label: its name in messages ("RoBERTa", "XLM-R").
    stem: its ``transformers`` class-name stem ("Roberta", "XLMRoberta").
  """
  return table_interop(
    model_type,
    "RoBERTa",  # XLM-R too: one architecture, one entry in convert's list of formats.
    model_config=functools.partial(model_config, family=family),
    config_json=functools.partial(config_json, model_type=model_type),
    rows=rows,
    params_from_hf=hf_state(label).params_from_hf,
    hf_from_params=hf_from_params,
    architecture=weight_table.by_head(f"{stem}ForMaskedLM", f"{stem}Model"),
  )


def model_config(values, source: str, family: str) -> ModelConfig:
  """The bert_jax model of a ``RobertaConfig`` / ``XLMRobertaConfig`` ``config.json``.

  ``pad_token_id`` (default 1, as ``RobertaConfig``'s) becomes ``model.roberta.padding_idx``.

  Raises:
    UserInputError: a pad id that is not an index below ``max_position_embeddings``, or
      whatever BERT's config reader refuses (activation, position scheme, decoder, sizes).
  """
  pad = values.get("pad_token_id", RobertaOptions.padding_idx)
  config = hf_config.model_config_from_bert_config(dict(values, model_type="bert"), source)
  if not isinstance(pad, int) or not 0 <= pad < config.max_position_embeddings - 1:
    raise UserInputError(
      f"{source} has pad_token_id={pad!r}; RoBERTa counts positions past that index, so it "
      f"must be an int in [0, max_position_embeddings - 1 = {config.max_position_embeddings - 1})"
    )
  sections = config.family_sections.replace(roberta=RobertaOptions(padding_idx=pad))
  return dataclasses.replace(config, family=family, family_sections=sections)


def config_json(config: ModelConfig, architecture: str, model_type: str) -> dict:
  """A Hugging Face ``config.json`` object (``RobertaConfig`` / ``XLMRobertaConfig`` keys)."""
  values = hf_config.bert_config_from_model_config(config, architecture)
  return dict(
    values, model_type=model_type, pad_token_id=config.roberta.padding_idx, **_SPECIAL_IDS
  )


def rows(config: ModelConfig):
  """The `Row` table of a RoBERTa of ``config``'s depth (``RobertaForMaskedLM`` names)."""
  table = [row for row in hf_weights.rows(config) if row.group != "nsp_head"]
  return weight_table.renamed(table, {**_HEAD_NAMES, "bert.": _PREFIX})


def _our_shapes(config: ModelConfig) -> dict:
  # The pretraining model (RobertaForMaskedLM) has no pooler; RobertaModel checkpoints do.
  hidden = config.hidden_size
  shapes = dict(weight_table.param_shapes(RobertaForMaskedLM, config))
  shapes.update({"bert/pooler/kernel": (hidden, hidden), "bert/pooler/bias": (hidden,)})
  return shapes


def hf_state(label: str) -> HfState:
  """The state dicts of ``(XLM)RobertaModel`` / ``...ForMaskedLM`` (the LM head, a pooler in
  the trunk class's), with ``label`` in messages."""
  return HfState(
    rows, label, _PREFIX, _TRUNK_PARTS, tied=_TIED, ignored=_IGNORED, our_shapes=_our_shapes
  )


_STATE = hf_state("RoBERTa")
params_from_hf = _STATE.params_from_hf
hf_from_params = _STATE.hf_from_params
