"""Hugging Face ALBERT ``config.json`` (``transformers.AlbertConfig`` keys) <-> the model section.

Hugging Face groups ALBERT's layers: ``num_hidden_groups`` groups of ``inner_group_num`` layers,
layer i using group ``i * groups // layers``. bert_jax's ``layer_sharing="all"`` is one group of
one layer and ``"none"`` one group per layer; the paper's attention-only / FFN-only sharing and
other groupings have no counterpart on the other side, and are refused.
"""

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig, model_config_from_dict

# (bert_jax model key, AlbertConfig key, required). Optional keys default as AlbertConfig does.
_KEYS = (
  ("vocab_size", "vocab_size", True),
  ("embedding_size", "embedding_size", True),
  ("hidden_size", "hidden_size", True),
  ("num_layers", "num_hidden_layers", True),
  ("num_heads", "num_attention_heads", True),
  ("intermediate_size", "intermediate_size", True),
  ("max_position_embeddings", "max_position_embeddings", False),
  ("type_vocab_size", "type_vocab_size", False),
  ("hidden_dropout_rate", "hidden_dropout_prob", False),
  ("attention_dropout_rate", "attention_probs_dropout_prob", False),
  ("initializer_range", "initializer_range", False),
  ("layer_norm_eps", "layer_norm_eps", False),
  ("hidden_act", "hidden_act", False),
)
# AlbertConfig's own defaults where they differ from bert_jax's.
_DEFAULTS = {
  "hidden_act": "gelu_new",
  "hidden_dropout_prob": 0.0,
  "attention_probs_dropout_prob": 0.0,
}
_INT_KEYS = (
  "vocab_size",
  "embedding_size",
  "hidden_size",
  "num_layers",
  "num_heads",
  "intermediate_size",
  "max_position_embeddings",
  "type_vocab_size",
)


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


def model_config_from_albert_config(values, source: str) -> ModelConfig:
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
  positions = values.get("position_embedding_type", "absolute")
  if positions != "absolute":
    raise UserInputError(
      f"{source} has position_embedding_type={positions!r}; bert_jax's ALBERT has absolute "
      "position embeddings only"
    )
  missing = [theirs for _, theirs, required in _KEYS if required and theirs not in values]
  if missing:
    raise UserInputError(f"{source} lacks {', '.join(missing)}; is it an ALBERT config.json?")
  fields = {ours: values[theirs] for ours, theirs, _ in _KEYS if values.get(theirs) is not None}
  for key in _INT_KEYS:
    if key in fields and (not isinstance(fields[key], int) or isinstance(fields[key], bool)):
      raise UserInputError(f"{source}: {key}={fields[key]!r} must be an integer")
  fields.update(family=names.ALBERT, layer_sharing=_sharing(values, source))
  return model_config_from_dict(fields)


def albert_config_from_model_config(config: ModelConfig, architecture: str) -> dict:
  """A Hugging Face ``config.json`` object (``transformers.AlbertConfig`` keys) for ``config``.

  Raises:
    UserInputError: a sharing mode Hugging Face's ALBERT cannot express.
  """
  if config.layer_sharing not in ("all", "none"):
    raise UserInputError(
      f"model.layer_sharing={config.layer_sharing!r} has no Hugging Face ALBERT layout "
      "(it shares all layers or none); export a model trained with 'all' or 'none'"
    )
  values = {theirs: getattr(config, ours) for ours, theirs, _ in _KEYS}
  values.update(
    architectures=[architecture],
    model_type="albert",
    num_hidden_groups=1 if config.layer_sharing == "all" else config.num_layers,
    inner_group_num=1,
    position_embedding_type="absolute",
    classifier_dropout_prob=config.hidden_dropout_rate,
  )
  return values
