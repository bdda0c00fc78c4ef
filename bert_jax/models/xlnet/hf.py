"""Hugging Face XLNet (``XLNetModel`` / ``XLNetLMHeadModel`` / ``XLNetForSequenceClassification``
names) <-> bert_jax's xlnet family: the config keys and the weight table.

XLNet's projections are stored as [d_model, heads, head_dim] on both sides, so only the FFN's
Linear weights are transposed. The LM projection is tied to the word table (``lm_loss.weight``
is that table again); its bias is ``lm_loss_bias``. The sequence summary of the classification
model is the trunk's ``pooler``.
"""

import dataclasses
import functools

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig, model_config_from_dict
from bert_jax.models.interop import config_table, weight_table
from bert_jax.models.interop.config_table import ConfigTable
from bert_jax.models.interop.hf_state import HfState
from bert_jax.models.interop.weight_table import Row
from bert_jax.models.xlnet.model import XLNetEncoder, XLNetLMHeadModel

MODEL_TYPE = names.XLNET
_PREFIX = "transformer."
_WORD_TABLE = "transformer.word_embedding.weight"
_TIED = "lm_loss.weight"
_TRUNK_PARTS = ("word_embedding.", "mask_emb", "layer.")  # XLNetModel names lack the prefix.
# (bert_jax model key, XLNetConfig key, required).
_TABLE = ConfigTable(
  config_table.RECURRENT_KEYS
  + (
    ("attention_dropout_rate", "dropout", False),
    ("initializer_range", "initializer_range", False),
    ("layer_norm_eps", "layer_norm_eps", False),
  ),
  "an XLNet config.json",
  MODEL_TYPE,
  # Settings of XLNetConfig whose other values compute something bert_jax's xlnet does not.
  fixed=tuple(
    (
      key,
      value,
      f"bert_jax's xlnet supports {key}={value!r} only, so this model's outputs would change",
    )
    for key, value in (
      ("ff_activation", "gelu"),
      ("bi_data", False),
      ("same_length", False),
      ("reuse_len", None),
    )
  ),
)
# transformers' attn_type -> model.causal.
_ATTN_TYPES = {"bi": False, "uni": True}
_LAYER_ROWS = (
  ("rel_attn/q/kernel", "rel_attn.q", False),
  ("rel_attn/k/kernel", "rel_attn.k", False),
  ("rel_attn/v/kernel", "rel_attn.v", False),
  ("rel_attn/o/kernel", "rel_attn.o", False),
  ("rel_attn/r/kernel", "rel_attn.r", False),
  ("rel_attn/r_w_bias", "rel_attn.r_w_bias", False),
  ("rel_attn/r_r_bias", "rel_attn.r_r_bias", False),
  ("rel_attn/r_s_bias", "rel_attn.r_s_bias", False),
  ("rel_attn/seg_embed", "rel_attn.seg_embed", False),
  ("rel_attn/layer_norm/scale", "rel_attn.layer_norm.weight", False),
  ("rel_attn/layer_norm/bias", "rel_attn.layer_norm.bias", False),
  ("ff/layer_1/kernel", "ff.layer_1.weight", True),
  ("ff/layer_1/bias", "ff.layer_1.bias", False),
  ("ff/layer_2/kernel", "ff.layer_2.weight", True),
  ("ff/layer_2/bias", "ff.layer_2.bias", False),
  ("ff/layer_norm/scale", "ff.layer_norm.weight", False),
  ("ff/layer_norm/bias", "ff.layer_norm.bias", False),
)


def model_config(values, source: str) -> ModelConfig:
  """The bert_jax model of a Hugging Face XLNet ``config.json`` (``attn_type='uni'`` is
  ``model.causal``).

  Raises:
    UserInputError: another model type, a setting bert_jax's xlnet does not compute
      (activation, bi_data, same_length, reuse_len), or missing sizes.
  """
  _TABLE.check_type(values, source)
  fields = _TABLE.read(values, source)
  attn_type = values.get("attn_type", "bi")
  if attn_type not in _ATTN_TYPES:
    raise UserInputError(f"{source} has attn_type={attn_type!r}; use 'bi' or 'uni'")
  fields.update(family=names.XLNET, attention_kind="dense", causal=_ATTN_TYPES[attn_type])
  return model_config_from_dict(fields)


def config_json(config: ModelConfig, architecture: str) -> dict:
  """A Hugging Face XLNet ``config.json`` object (``transformers.XLNetConfig`` keys)."""
  values = _TABLE.write(config, architecture)
  values.update(d_head=config.head_dim, untie_r=True, attn_type="uni" if config.causal else "bi")
  return values


def rows(config: ModelConfig):
  """The `Row` table of an XLNet of ``config``'s depth (``XLNetLMHeadModel`` names)."""
  table = [
    Row("bert/word_embedding/embedding", _WORD_TABLE, weight_table.REQUIRED_GROUP),
    Row("bert/mask_emb", "transformer.mask_emb", weight_table.REQUIRED_GROUP),
  ]
  table += [
    Row(
      f"bert/layer_{i}/{ours}",
      f"{_PREFIX}layer.{i}.{theirs}",
      weight_table.REQUIRED_GROUP,
      transpose=transpose,
    )
    for i in range(config.num_layers)
    for ours, theirs, transpose in _LAYER_ROWS
  ]
  table += [
    Row("bert/pooler/kernel", "sequence_summary.summary.weight", "pooler", transpose=True),
    Row("bert/pooler/bias", "sequence_summary.summary.bias", "pooler"),
    Row("lm_loss_bias", "lm_loss.bias", "mlm_head"),
  ]
  return table


@functools.lru_cache(maxsize=8)
def param_shapes(config: ModelConfig) -> dict:
  """{"bert/layer_0/...": shape} of `XLNetLMHeadModel` plus the trunk's pooler."""
  shapes = weight_table.module_shapes(XLNetLMHeadModel(config))
  trunk = weight_table.module_shapes(XLNetEncoder(config))
  return shapes | {f"bert/{path}": shape for path, shape in trunk.items()}


def _our_shapes(config: ModelConfig) -> dict:
  return param_shapes(dataclasses.replace(config, dtype="float32"))


_STATE = HfState(
  rows, "XLNet", _PREFIX, _TRUNK_PARTS, tied={_TIED: _WORD_TABLE}, our_shapes=_our_shapes
)
_KEPT = (*_TRUNK_PARTS, _PREFIX, "sequence_summary.", "lm_loss.")
hf_from_params = _STATE.hf_from_params


def params_from_hf(state, config: ModelConfig, source: str = "the state dict"):
  """`HfState.params_from_hf` of any of the classes above; the task heads of transformers'
  XLNet classes (``logits_proj``, ``qa_outputs``, ...) stay behind."""
  kept = {name: value for name, value in state.items() if name.startswith(_KEPT)}
  return _STATE.params_from_hf(kept, config, source)


architecture = weight_table.by_head("XLNetLMHeadModel", "XLNetModel", "lm_loss_bias")
