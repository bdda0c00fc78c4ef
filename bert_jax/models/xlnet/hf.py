"""Hugging Face XLNet (``XLNetModel`` / ``XLNetLMHeadModel`` / ``XLNetForSequenceClassification``
names) <-> bert_jax's xlnet family: the config keys and the weight table.

XLNet's projections are stored as [d_model, heads, head_dim] on both sides, so only the FFN's
Linear weights are transposed. The LM projection is tied to the word table (``lm_loss.weight``
is that table again); its bias is ``lm_loss_bias``. The sequence summary of the classification
model is the trunk's ``pooler``.
"""

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig, model_config_from_dict
from bert_jax.models.interop import weight_table
from bert_jax.models.interop.config_table import ConfigTable
from bert_jax.models.interop.weight_table import Row
from bert_jax.models.xlnet.model import XLNetEncoder, XLNetLMHeadModel

_PREFIX = "transformer."
_WORD_TABLE = "transformer.word_embedding.weight"
_TIED = "lm_loss.weight"
# (bert_jax model key, XLNetConfig key, required).
_TABLE = ConfigTable(
  (
    ("vocab_size", "vocab_size", True),
    ("hidden_size", "d_model", True),
    ("num_layers", "n_layer", True),
    ("num_heads", "n_head", True),
    ("intermediate_size", "d_inner", True),
    ("hidden_dropout_rate", "dropout", False),
    ("attention_dropout_rate", "dropout", False),
    ("initializer_range", "initializer_range", False),
    ("layer_norm_eps", "layer_norm_eps", False),
    ("recurrence.mem_len", "mem_len", False),
    ("recurrence.clamp_len", "clamp_len", False),
  ),
  "an XLNet config.json",
)
# Settings of XLNetConfig whose other values compute something bert_jax's xlnet does not.
_FIXED = {
  "ff_activation": "gelu",
  "bi_data": False,
  "same_length": False,
  "reuse_len": None,
}
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


def model_config_from_xlnet_config(values, source: str) -> ModelConfig:
  """The bert_jax model of a Hugging Face XLNet ``config.json`` (``attn_type='uni'`` is
  ``model.causal``).

  Raises:
    UserInputError: another model type, a setting bert_jax's xlnet does not compute
      (activation, bi_data, same_length, reuse_len), or missing sizes.
  """
  if not isinstance(values, dict) or values.get("model_type") != names.XLNET:
    raise UserInputError(f"{source} is not an XLNet config.json (model_type 'xlnet')")
  for key, supported in _FIXED.items():
    if values.get(key, supported) != supported:
      raise UserInputError(
        f"{source} has {key}={values[key]!r}; bert_jax's xlnet supports {key}={supported!r} "
        "only, so this model's outputs would change"
      )
  fields = _TABLE.read(values, source)
  attn_type = values.get("attn_type", "bi")
  if attn_type not in _ATTN_TYPES:
    raise UserInputError(f"{source} has attn_type={attn_type!r}; use 'bi' or 'uni'")
  fields.update(family=names.XLNET, attention_kind="dense", causal=_ATTN_TYPES[attn_type])
  return model_config_from_dict(fields)


def xlnet_config_from_model_config(config: ModelConfig, architecture: str) -> dict:
  """A Hugging Face XLNet ``config.json`` object (``transformers.XLNetConfig`` keys)."""
  values = _TABLE.write(config)
  values.update(_FIXED, architectures=[architecture], model_type=names.XLNET)
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
  ids = jnp.zeros((1, 2), jnp.int32)
  lm = jax.eval_shape(lambda: XLNetLMHeadModel(config).init(jax.random.key(0), ids, ids, ids + 1))
  trunk = jax.eval_shape(lambda: XLNetEncoder(config).init(jax.random.key(0), ids, ids, ids + 1))
  flat = weight_table.flatten(nn.unbox(lm)["params"])
  flat.update({f"bert/{k}": v for k, v in weight_table.flatten(nn.unbox(trunk)["params"]).items()})
  return {path: tuple(leaf.shape) for path, leaf in flat.items()}


def _canonical(name: str) -> str:
  """``XLNetLMHeadModel``'s name for a tensor of an XLNetModel / task checkpoint."""
  if name.startswith(("word_embedding.", "mask_emb", "layer.")):
    return _PREFIX + name
  return name


def params_from_hf(state, config: ModelConfig, source: str = "the state dict"):
  """bert_jax params from a Hugging Face XLNet state dict (any of the classes above).

  Raises:
    UserInputError: tensors are missing, unexpected or of another shape (one message), or the
      LM projection is not tied to the word table.
  """
  config = dataclasses.replace(config, dtype="float32")
  tensors = {_canonical(name): value for name, value in state.items()}
  weight_table.fold_tied_copies(tensors, {_TIED: _WORD_TABLE}, source, "XLNet")
  # Task heads of transformers' XLNet classes (logits_proj, qa_outputs, ...) stay behind.
  ignored = frozenset({_TIED}) | frozenset(
    name for name in tensors if not name.startswith((_PREFIX, "sequence_summary.", "lm_loss."))
  )
  return weight_table.import_state(
    rows(config),
    tensors,
    config,
    source=source,
    ignored=ignored,
    our_shapes=param_shapes(config),
  )


def hf_from_params(params, config: ModelConfig):
  """Hugging Face names -> numpy arrays for the parts ``params`` holds (no tied copy)."""
  return weight_table.export_params(rows(config), params)


def architecture(params) -> str:
  """The transformers class that loads an XLNet export of ``params``."""
  return "XLNetLMHeadModel" if "lm_loss_bias" in params else "XLNetModel"
