"""Hugging Face ALBERT ``config.json`` (``transformers.AlbertConfig`` keys) <-> the model section.

Hugging Face groups ALBERT's layers: ``num_hidden_groups`` groups of ``inner_group_num`` layers,
layer i using group ``i * groups // layers``. bert_jax's ``model.albert.layer_sharing="all"``
is one group of one layer and ``"none"`` one group per layer; the paper's attention-only /
FFN-only sharing and other groupings have no counterpart on the other side, and are refused.
"""

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models.albert import options
from bert_jax.models.config import ModelConfig, model_config_from_dict
from bert_jax.models.interop import hf_config
from bert_jax.models.interop.config_table import ConfigTable

MODEL_TYPE = "albert"
# BERT's rows (AlbertConfig has BERT's key names) plus the factorised embedding width and the
# activation. Optional keys default as AlbertConfig does.
_TABLE = ConfigTable(
  hf_config.KEYS
  + (("embedding_size", "embedding_size", True), ("hidden_act", "hidden_act", False)),
  "an ALBERT config.json",
  MODEL_TYPE,
  fixed=(
    (*hf_config.ABSOLUTE_POSITIONS, "bert_jax's ALBERT has absolute position embeddings only"),
  ),
)
# AlbertConfig's own defaults where they differ from bert_jax's.
_DEFAULTS = {
  "hidden_act": "gelu_new",
  "hidden_dropout_prob": 0.0,
  "attention_probs_dropout_prob": 0.0,
}


def _sharing(values, source: str) -> str:
  layers = values["num_hidden_layers"]
  groups = values.get("num_hidden_groups", 1)
  inner = values.get("inner_group_num", 1)
  if inner == 1 and groups == 1:
    return "all"
  if inner == 1 and groups == layers:
    return "none"
  raise UserInputError(
    f"{source} has num_hidden_groups={groups}, inner_group_num={inner} for {layers} layers; "
    "bert_jax's ALBERT converts one shared layer (1, 1) or one group per layer "
    f"({layers}, 1) only"
  )


def model_config(values, source: str) -> ModelConfig:
  """The bert_jax model (family albert) of a Hugging Face ALBERT ``config.json``.

  Raises:
    UserInputError: another position scheme or activation, unsupported layer groups, or
      missing / non-integer sizes.
  """
  values = {**_DEFAULTS, **values}
  if values.get("hidden_act") not in ("gelu", "gelu_new"):
    raise UserInputError(
      f"{source} has hidden_act={values.get('hidden_act')!r}; bert_jax's ALBERT computes "
      "'gelu' (exact) or 'gelu_new' (tanh) only"
    )
  fields = _TABLE.read(values, source)
  fields.update(family=names.ALBERT, albert={"layer_sharing": _sharing(values, source)})
  return model_config_from_dict(fields, options.SECTIONS)


def config_json(config: ModelConfig, architecture: str) -> dict:
  """A Hugging Face ``config.json`` object (``transformers.AlbertConfig`` keys) for ``config``.

  Raises:
    UserInputError: a sharing mode Hugging Face's ALBERT cannot express.
  """
  if config.albert.layer_sharing not in ("all", "none"):
    raise UserInputError(
      f"model.albert.layer_sharing={config.albert.layer_sharing!r} has no Hugging Face ALBERT "
      "layout (it shares all layers or none); export a model trained with 'all' or 'none'"
    )
  values = _TABLE.write(config, architecture)
  values.update(
    num_hidden_groups=1 if config.albert.layer_sharing == "all" else config.num_layers,
    inner_group_num=1,
    classifier_dropout_prob=config.hidden_dropout_rate,
  )
  return values
