"""Hugging Face BERT state dicts <-> the bert family's params (the table: `interop.hf_weights`).

Checkpoints of ``BertModel``, ``BertForPreTraining`` and ``BertForMaskedLM`` all load; old
ones with LayerNorm ``gamma`` / ``beta`` names too.
"""

import functools

from bert_jax.models.bert.model import BertForPreTraining
from bert_jax.models.config import ModelConfig
from bert_jax.models.interop import hf_weights, weight_table

_STATE = hf_weights.hf_state(functools.partial(weight_table.param_shapes, BertForPreTraining))
hf_from_params = _STATE.hf_from_params


def _current_name(name: str) -> str:
  """The name of a tensor of an old checkpoint (LayerNorm ``gamma`` / ``beta``) today."""
  if ".LayerNorm." in name:
    name = name.replace(".LayerNorm.gamma", ".LayerNorm.weight").replace(
      ".LayerNorm.beta", ".LayerNorm.bias"
    )
  return name


def params_from_hf(state, config: ModelConfig, source: str = "the state dict"):
  """`HfState.params_from_hf` of any BERT checkpoint flavour (old LayerNorm names too)."""
  return _STATE.params_from_hf(
    {_current_name(name): value for name, value in state.items()}, config, source
  )
