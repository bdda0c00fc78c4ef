"""BERT config files <-> bert_jax's model section.

Hugging Face's ``config.json`` and the original TF BERT's ``bert_config.json`` share the key
names (``num_hidden_layers``, ``hidden_dropout_prob``, ...); Hugging Face adds ``model_type``,
``position_embedding_type`` and ``layer_norm_eps``. Only what bert_jax's BERT computes exactly
is accepted: absolute positions, an encoder without cross-attention, and the exact (erf) GELU.
"""

from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig, model_config_from_dict
from bert_jax.models.interop.config_table import ConfigTable

# (bert_jax model key, BERT config key, required). Optional keys default as in both BERTs.
KEYS = (
  ("vocab_size", "vocab_size", True),
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
)
# A position scheme other than absolute has no counterpart in any of bert_jax's families.
ABSOLUTE_POSITIONS = "position_embedding_type", "absolute"
_TABLE = ConfigTable(
  KEYS,
  "a BERT config.json",
  "bert",
  fixed=(
    (
      "hidden_act",
      "gelu",
      "bert_jax's BERT uses the exact (erf) GELU ('gelu'), so this model's outputs would "
      "change: convert a model trained with 'gelu'",
    ),
    (*ABSOLUTE_POSITIONS, "bert_jax's BERT has absolute position embeddings only"),
  ),
)


def _check_architecture(values, source: str):
  model_type = values.get("model_type", "bert")
  if model_type != "bert":
    raise UserInputError(
      f"{source} describes a {model_type!r} model; convert handles BERT (model_type 'bert') "
      "and ALBERT ('albert') only"
    )
  if values.get("is_decoder") or values.get("add_cross_attention"):
    raise UserInputError(
      f"{source} describes a decoder (is_decoder / add_cross_attention); "
      "convert handles BERT encoders only"
    )


def model_config_from_bert_config(values, source: str) -> ModelConfig:
  """The bert_jax model of a Hugging Face ``config.json`` or TF ``bert_config.json``.

  Args:
    values: the parsed JSON object.
    source: the file's path, for error messages.

  Returns:
    The model config (dense attention, unscanned layers, float32).

  Raises:
    UserInputError: another architecture, activation or position scheme, or missing /
      non-integer sizes.
  """
  if not isinstance(values, dict):
    raise UserInputError(f"{source} is not a JSON object; pass a BERT config.json")
  _check_architecture(values, source)
  return model_config_from_dict(_TABLE.read(values, source))


def bert_config_from_model_config(config: ModelConfig, architecture: str) -> dict:
  """A Hugging Face ``config.json`` object for ``config`` (``transformers.BertConfig`` keys).

  Args:
    config: the bert_jax model (a post-LN BERT).
    architecture: the ``transformers`` class the weights fit best, e.g. "BertForPreTraining".

  Raises:
    UserInputError: the model computes another activation than the exact GELU.
  """
  if config.hidden_act != "gelu":
    raise UserInputError(
      f"model.hidden_act={config.hidden_act!r}: Hugging Face BERT exports carry the exact GELU "
      "('gelu') only, so this model's outputs would change; export a model trained with 'gelu'"
    )
  return _TABLE.write(config, architecture)
