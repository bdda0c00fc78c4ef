"""Hugging Face XLM (``config.json`` and weights) <-> bert_jax's ``xlm`` family.

``XLMWithLMHeadModel`` checkpoints (``transformer.*`` plus ``pred_layer.proj.*``) and
``XLMModel`` ones (the same names without ``transformer.``) both load. XLM names its layers by
kind, not by layer (``attentions.<i>.q_lin``, ``layer_norm1.<i>``, ``ffns.<i>.lin1``,
``layer_norm2.<i>``); the layouts otherwise differ as BERT's do (PyTorch Linear weights are
[out, in], bert_jax keeps attention projections per head). ``pred_layer.proj.weight`` is tied
to the word table (a .bin file repeats it). Only what bert_jax computes converts: the exact
GELU (``gelu_activation``), a full softmax (not ``asm``), an FFN of 4 x ``emb_dim``.
"""

import functools

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig, model_config_from_dict
from bert_jax.models.interop import weight_table
from bert_jax.models.interop.config_table import ConfigTable
from bert_jax.models.interop.hf_state import HfState
from bert_jax.models.interop.weight_table import Row
from bert_jax.models.xlm import options as xlm_options
from bert_jax.models.xlm.model import XlmWithLMHead

MODEL_TYPE = "xlm"
_PREFIX = "transformer."
_WORD_TABLE = "transformer.embeddings.weight"
_TIED_PROJECTION = "pred_layer.proj.weight"
_IGNORED = ("transformer.position_ids",)  # A buffer older transformers saved.
# The first parts of XLMModel's names (XLMWithLMHeadModel's lack the prefix).
_TRUNK_PARTS = (
  "embeddings.",
  "position_embeddings.",
  "lang_embeddings.",
  "layer_norm_emb.",
  "attentions.",
  "layer_norm1.",
  "ffns.",
  "layer_norm2.",
  "position_ids",
)

# (bert_jax model key, XLMConfig key, required).
_TABLE = ConfigTable(
  (
    ("vocab_size", "vocab_size", True),
    ("hidden_size", "emb_dim", True),
    ("num_layers", "n_layers", True),
    ("num_heads", "n_heads", True),
    ("max_position_embeddings", "max_position_embeddings", False),
    ("hidden_dropout_rate", "dropout", False),
    ("attention_dropout_rate", "attention_dropout", False),
    ("layer_norm_eps", "layer_norm_eps", False),
    ("initializer_range", "init_std", False),
    ("causal", "causal", False),
  ),
  "an XLM config.json",
  MODEL_TYPE,
  fixed=(
    ("asm", False, "bert_jax's XLM has a full softmax output, not an adaptive one"),
    ("gelu_activation", True, "bert_jax's XLM uses the exact GELU"),
    ("is_encoder", True, "bert_jax's XLM is an encoder"),
  ),
)
# XLM's names of `weight_table.ENCODER_LAYER_PARAMS` in layer ``{i}``, under ``transformer.``.
_LAYER_NAMES = (
  "attentions.{i}.q_lin.weight",
  "attentions.{i}.q_lin.bias",
  "attentions.{i}.k_lin.weight",
  "attentions.{i}.k_lin.bias",
  "attentions.{i}.v_lin.weight",
  "attentions.{i}.v_lin.bias",
  "attentions.{i}.out_lin.weight",
  "attentions.{i}.out_lin.bias",
  "layer_norm1.{i}.weight",
  "layer_norm1.{i}.bias",
  "ffns.{i}.lin1.weight",
  "ffns.{i}.lin1.bias",
  "ffns.{i}.lin2.weight",
  "ffns.{i}.lin2.bias",
  "layer_norm2.{i}.weight",
  "layer_norm2.{i}.bias",
)


def _languages(values, source: str) -> tuple:
  """Language names in id order from ``lang2id`` (or ``id2lang``); () when neither is set."""
  lang2id = values.get("lang2id")
  if not lang2id and values.get("id2lang"):
    lang2id = {name: int(i) for i, name in values["id2lang"].items()}
  n_langs = values.get("n_langs", 1)
  if not lang2id:
    if n_langs > 1:
      raise UserInputError(
        f"{source} has n_langs={n_langs} but no lang2id; bert_jax names its languages "
        "(model.xlm.languages): add lang2id to config.json"
      )
    return ()
  ordered = sorted(lang2id, key=lang2id.get)
  if [lang2id[name] for name in ordered] != list(range(len(ordered))) or len(ordered) != n_langs:
    raise UserInputError(
      f"{source}: lang2id={lang2id} does not number n_langs={n_langs} languages 0..n-1"
    )
  return tuple(ordered)


def model_config(values, source: str) -> ModelConfig:
  """The bert_jax model of a Hugging Face ``XLMConfig`` ``config.json``.

  Raises:
    UserInputError: an adaptive softmax, ReLU, a decoder, missing / non-integer sizes, or
      languages that lang2id does not name.
  """
  fields = _TABLE.read(values, source)
  xlm = {
    "languages": _languages(values, source),
    "use_lang_emb": bool(values.get("use_lang_emb", True)),
    "sinusoidal_embeddings": bool(values.get("sinusoidal_embeddings", False)),
  }
  return model_config_from_dict(
    dict(
      fields,
      family=names.XLM,
      intermediate_size=4 * fields["hidden_size"],  # transformers' XLM fixes it.
      type_vocab_size=1,
      xlm=xlm,
    ),
    xlm_options.SECTIONS,
  )


def config_json(config: ModelConfig, architecture: str) -> dict:
  """A Hugging Face ``config.json`` object (``transformers.XLMConfig`` keys)."""
  if config.intermediate_size != 4 * config.hidden_size or config.hidden_act != "gelu":
    raise UserInputError(
      f"model.intermediate_size={config.intermediate_size}, hidden_act={config.hidden_act!r}: "
      "Hugging Face's XLM fixes a 4 x hidden_size feed-forward with the exact GELU"
    )
  options = config.xlm
  values = _TABLE.write(config, architecture)
  values.update(
    n_langs=options.n_langs,
    use_lang_emb=options.use_lang_emb,
    sinusoidal_embeddings=options.sinusoidal_embeddings,
    lang2id={name: i for i, name in enumerate(options.languages)},
    id2lang={str(i): name for i, name in enumerate(options.languages)},
    tie_word_embeddings=True,
  )
  return values


architecture = weight_table.by_head("XLMWithLMHeadModel", "XLMModel")


def rows(config: ModelConfig):
  """The `Row` table of an XLM of ``config`` (``XLMWithLMHeadModel`` names)."""
  embedding_rows = weight_table.named_rows(
    "bert/embeddings/",
    weight_table.EMBEDDING_PARAMS,
    [
      _WORD_TABLE,
      f"{_PREFIX}position_embeddings.weight",
      None,  # No token types.
      f"{_PREFIX}layer_norm_emb.weight",
      f"{_PREFIX}layer_norm_emb.bias",
    ],
    "encoder",
  )
  if config.xlm.has_language_embeddings:
    embedding_rows.append(
      Row(
        "bert/embeddings/language_embeddings/embedding",
        f"{_PREFIX}lang_embeddings.weight",
        "encoder",
      )
    )
  layer_rows = []
  for i in range(config.num_layers):
    layer_names = [name.format(i=i) for name in _LAYER_NAMES]
    layer_rows += weight_table.encoder_layer_rows(
      [(f"bert/encoder/layer_{i}/", _PREFIX)], layer_names, transposed=True
    )
  head_rows = [Row("mlm_head/output_bias", "pred_layer.proj.bias", "mlm_head")]
  return embedding_rows + layer_rows + head_rows


_STATE = HfState(
  rows,
  "XLM",
  _PREFIX,
  _TRUNK_PARTS,
  tied={_TIED_PROJECTION: _WORD_TABLE},
  ignored=_IGNORED,
  our_shapes=functools.partial(weight_table.param_shapes, XlmWithLMHead),
)
params_from_hf = _STATE.params_from_hf
hf_from_params = _STATE.hf_from_params
