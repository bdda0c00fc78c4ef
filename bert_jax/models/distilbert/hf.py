"""Hugging Face DistilBERT (``config.json`` and weights) <-> bert_jax's ``distilbert`` family.

``DistilBertModel`` checkpoints (names ``embeddings.*``, ``transformer.layer.<i>.*``) and
``DistilBertForMaskedLM`` ones (the same under ``distilbert.``, plus ``vocab_transform``,
``vocab_layer_norm`` and ``vocab_projector``) both load; the layout differences are those of
BERT (`hf_weights`): PyTorch Linear weights are [out, in], bert_jax keeps attention
projections per head. Hugging Face's DistilBERT hard-codes LayerNorm epsilon 1e-12 and has no
token types; only learned (not sinusoidal) positions and the exact GELU are accepted.
"""

import functools

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig, model_config_from_dict
from bert_jax.models.distilbert.model import DistilBertForMaskedLM
from bert_jax.models.interop import weight_table
from bert_jax.models.interop.config_table import ConfigTable
from bert_jax.models.interop.hf_state import HfState

MODEL_TYPE = "distilbert"
_PREFIX = "distilbert."
_TRUNK_PARTS = ("embeddings.", "transformer.")  # DistilBertModel names lack the prefix.
_WORD_TABLE = "distilbert.embeddings.word_embeddings.weight"
_TIED_PROJECTOR = "vocab_projector.weight"  # .bin files repeat the word table here.
_IGNORED = ("distilbert.embeddings.position_ids",)  # A buffer older transformers saved.
_LAYER_NORM_EPS = 1e-12  # transformers' DistilBERT has no config key for it.

# (bert_jax model key, DistilBertConfig key, required).
_TABLE = ConfigTable(
  (
    ("vocab_size", "vocab_size", True),
    ("hidden_size", "dim", True),
    ("num_layers", "n_layers", True),
    ("num_heads", "n_heads", True),
    ("intermediate_size", "hidden_dim", True),
    ("max_position_embeddings", "max_position_embeddings", False),
    ("hidden_dropout_rate", "dropout", False),
    ("attention_dropout_rate", "attention_dropout", False),
    ("initializer_range", "initializer_range", False),
  ),
  "a DistilBERT config.json",
  MODEL_TYPE,
  fixed=(
    (
      "activation",
      "gelu",
      "bert_jax's DistilBERT uses the exact (erf) GELU ('gelu'): convert a model trained with "
      "'gelu'",
    ),
    ("sinusoidal_pos_embds", False, "bert_jax's DistilBERT has learned position embeddings only"),
    (
      "tie_word_embeddings",
      True,
      "bert_jax ties the MLM projector to the word table, convert a model with tied embeddings",
    ),
  ),
)

_EMBEDDING_ROWS = weight_table.named_rows(
  "bert/embeddings/",
  weight_table.EMBEDDING_PARAMS,
  [
    _WORD_TABLE,
    "distilbert.embeddings.position_embeddings.weight",
    None,  # No token types.
    "distilbert.embeddings.LayerNorm.weight",
    "distilbert.embeddings.LayerNorm.bias",
  ],
  "encoder",
)
_HEAD_ROWS = weight_table.named_rows(
  "mlm_head/",
  weight_table.MLM_HEAD_PARAMS,
  [
    "vocab_transform.weight",
    "vocab_transform.bias",
    "vocab_layer_norm.weight",
    "vocab_layer_norm.bias",
    "vocab_projector.bias",
  ],
  "mlm_head",
)
# DistilBERT's names of `weight_table.ENCODER_LAYER_PARAMS` inside ``transformer.layer.<i>.``.
_LAYER_NAMES = (
  "attention.q_lin.weight",
  "attention.q_lin.bias",
  "attention.k_lin.weight",
  "attention.k_lin.bias",
  "attention.v_lin.weight",
  "attention.v_lin.bias",
  "attention.out_lin.weight",
  "attention.out_lin.bias",
  "sa_layer_norm.weight",
  "sa_layer_norm.bias",
  "ffn.lin1.weight",
  "ffn.lin1.bias",
  "ffn.lin2.weight",
  "ffn.lin2.bias",
  "output_layer_norm.weight",
  "output_layer_norm.bias",
)


def model_config(values, source: str) -> ModelConfig:
  """The bert_jax model of a Hugging Face ``DistilBertConfig`` ``config.json``.

  Raises:
    UserInputError: sinusoidal positions, another activation, untied output embeddings, or
      missing / non-integer sizes.
  """
  fields = _TABLE.read(values, source)
  return model_config_from_dict(
    dict(fields, family=names.DISTILBERT, layer_norm_eps=_LAYER_NORM_EPS)
  )


def config_json(config: ModelConfig, architecture: str) -> dict:
  """A Hugging Face ``config.json`` object (``transformers.DistilBertConfig`` keys)."""
  if config.layer_norm_eps != _LAYER_NORM_EPS:
    raise UserInputError(
      f"model.layer_norm_eps={config.layer_norm_eps} but Hugging Face's DistilBERT fixes "
      f"{_LAYER_NORM_EPS}; the exported model would compute something else"
    )
  return _TABLE.write(config, architecture)


architecture = weight_table.by_head("DistilBertForMaskedLM", "DistilBertModel")


def rows(config: ModelConfig):
  """The `Row` table of a DistilBERT of ``config``'s depth (``DistilBertForMaskedLM`` names)."""
  layers = [
    (f"bert/encoder/layer_{i}/", f"{_PREFIX}transformer.layer.{i}.")
    for i in range(config.num_layers)
  ]
  layer_rows = weight_table.encoder_layer_rows(layers, _LAYER_NAMES, transposed=True)
  return _EMBEDDING_ROWS + layer_rows + _HEAD_ROWS


_STATE = HfState(
  rows,
  "DistilBERT",
  _PREFIX,
  _TRUNK_PARTS,
  tied={_TIED_PROJECTOR: _WORD_TABLE},
  ignored=_IGNORED,
  our_shapes=functools.partial(weight_table.param_shapes, DistilBertForMaskedLM),
)
params_from_hf = _STATE.params_from_hf
hf_from_params = _STATE.hf_from_params
