"""Hugging Face Transformer-XL (``TransfoXLModel`` / ``TransfoXLLMHeadModel``, model_type
"transfo-xl") <-> bert_jax's transformer_xl family: the config keys and the weight table.

Adaptive input and softmax convert too (``cutoffs``, ``div_val``, ``tie_projs`` become
``model.adaptive``; the layout of ``transfo-xl-wt103``). PyTorch Linear weights are [out, in],
so every input projection is transposed (the softmax's ``out_projs`` are stored [d_model,
d_emb_i], as bert_jax's kernels); ``qkv_net`` is bert_jax's fused [d_model, 3 * heads,
head_dim] kernel. transformers keeps tied tensors under several names: the softmax tables
``crit.out_layers.i.weight`` are the word tables, the ``crit.out_projs.i`` that ``tie_projs``
ties are input projections, and without ``model.recurrence.untie_r`` every layer's
``r_w_bias`` / ``r_r_bias`` is the trunk's. Imports check that the copies agree; exports
write them all (and the sinusoid buffer ``pos_emb.inv_freq``), so transformers loads with no
key missing.
"""

import dataclasses
import functools

import numpy as np

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig, model_config_from_dict
from bert_jax.models.interop import config_table, weight_table
from bert_jax.models.interop.config_table import ConfigTable
from bert_jax.models.interop.hf_state import HfState
from bert_jax.models.interop.weight_table import Row
from bert_jax.models.recurrence_options import check_own_layers
from bert_jax.models.transformer_xl import adaptive_config, adaptive_softmax
from bert_jax.models.transformer_xl.model import TransformerXLLMHeadModel

MODEL_TYPE = "transfo-xl"
_PREFIX = "transformer."
_INV_FREQ = "transformer.pos_emb.inv_freq"
# (bert_jax model key, TransfoXLConfig key, required).
_TABLE = ConfigTable(
  config_table.RECURRENT_KEYS
  + (
    ("embedding_size", "d_embed", False),
    ("attention_dropout_rate", "dropatt", False),
    ("initializer_range", "init_std", False),
    ("layer_norm_eps", "layer_norm_epsilon", False),
    ("recurrence.same_length", "same_length", False),
    ("recurrence.untie_r", "untie_r", False),
    ("pre_layer_norm", "pre_lnorm", False),
  ),
  "a Transformer-XL config.json",
  MODEL_TYPE,
)
# Settings of TransfoXLConfig whose other values compute something bert_jax does not, with
# the fix each refusal names.
_FIXED = {
  "attn_type": (0, "absolute or learnable positions (attn_type != 0)"),
  "sample_softmax": (-1, "a sampled softmax (sample_softmax > 0)"),
  "tie_word_embeddings": (True, "an LM table untied from the word table"),
}
_LAYER_ROWS = (
  ("rel_attn/qkv/kernel", "dec_attn.qkv_net.weight", 1, True),
  ("rel_attn/o/kernel", "dec_attn.o_net.weight", 1, False),
  ("rel_attn/r/kernel", "dec_attn.r_net.weight", 1, True),
  ("rel_attn/layer_norm/scale", "dec_attn.layer_norm.weight", None, False),
  ("rel_attn/layer_norm/bias", "dec_attn.layer_norm.bias", None, False),
  ("ff/layer_1/kernel", "pos_ff.CoreNet.0.weight", None, True),
  ("ff/layer_1/bias", "pos_ff.CoreNet.0.bias", None, False),
  ("ff/layer_2/kernel", "pos_ff.CoreNet.3.weight", None, True),
  ("ff/layer_2/bias", "pos_ff.CoreNet.3.bias", None, False),
  ("ff/layer_norm/scale", "pos_ff.layer_norm.weight", None, False),
  ("ff/layer_norm/bias", "pos_ff.layer_norm.bias", None, False),
)
_BIASES = ("r_w_bias", "r_r_bias")


def model_config(values, source: str) -> ModelConfig:
  """The bert_jax model of a Hugging Face Transformer-XL ``config.json``.

  Raises:
    UserInputError: another model type, an adaptive softmax or another setting bert_jax does
      not compute, heads that do not split d_model, or missing sizes.
  """
  _TABLE.check_type(values, source)
  for key, (supported, what) in _FIXED.items():
    value = values.get(key, supported)
    if value != supported and not (key == "sample_softmax" and value <= 0):
      raise UserInputError(
        f"{source} has {key}={value!r}: {what}, which bert_jax's transformer_xl does not "
        f"compute; convert a model trained with {key}={supported!r}"
      )
  fields = _TABLE.read(values, source)
  d_head = values.get("d_head", values["d_model"] // values["n_head"])
  if d_head * values["n_head"] != values["d_model"]:
    raise UserInputError(
      f"{source} has d_head={d_head} x n_head={values['n_head']} != d_model="
      f"{values['d_model']}; bert_jax's heads split d_model, so convert such a model only "
      "with d_head = d_model / n_head"
    )
  if fields.get("embedding_size") == fields["hidden_size"]:
    fields["embedding_size"] = 0
  cutoffs = list(values.get("cutoffs") or [])
  # transformers reads one tie_projs entry per cluster (its config may list more).
  tie_projs = list(values.get("tie_projs") or [])[: len(cutoffs) + 1]
  fields.update(
    family=names.TRANSFORMER_XL,
    attention_kind="dense",
    causal=True,
    adaptive={"cutoffs": cutoffs, "div_val": values.get("div_val", 1), "tie_projs": tie_projs},
  )
  try:
    return model_config_from_dict(fields, adaptive_config.SECTIONS, check_own_layers)
  except UserInputError as error:
    raise UserInputError(f"{source}: {error}") from None


def config_json(config: ModelConfig, architecture: str) -> dict:
  """A Hugging Face ``config.json`` object (``transformers.TransfoXLConfig`` keys)."""
  values = _TABLE.write(config, architecture)
  values.update({key: supported for key, (supported, _) in _FIXED.items()})
  options = config.adaptive
  clusters = len(options.cutoffs) + 1
  values.update(
    d_embed=config.embedding_width,
    d_head=config.head_dim,
    cutoffs=list(options.cutoffs),
    div_val=options.div_val,
    adaptive=bool(options.cutoffs),
    tie_projs=[adaptive_config.tied_projection(config, i) for i in range(clusters)],
  )
  return values


def _projected(config: ModelConfig) -> bool:
  """Whether the word tables have input projections (transformers' ``emb_projs``)."""
  return config.adaptive.div_val > 1 or config.embedding_width != config.hidden_size


def _input_tables(config: ModelConfig) -> int:
  """How many word tables (``emb_layers``) there are: one, or one per cluster (div_val > 1)."""
  return len(config.adaptive.cutoffs) + 1 if config.adaptive.div_val > 1 else 1


def _softmax_rows(config: ModelConfig):
  """The LM head's rows: biases, cluster scores and the untied projections (``crit.``)."""
  clusters = len(config.adaptive.cutoffs) + 1
  single = config.adaptive.div_val == 1
  table = [
    Row(f"output_bias{adaptive_softmax.suffix(i)}", f"crit.out_layers.{i}.bias", "mlm_head")
    for i in range(1 if single else clusters)
  ]
  if clusters > 1:
    table += [Row(name, f"crit.{name}", "mlm_head") for name in ("cluster_weight", "cluster_bias")]
  if _projected(config):
    own = (i for i in range(clusters) if not adaptive_config.tied_projection(config, i))
    table += [
      Row(
        f"output_projection{adaptive_softmax.suffix(i)}/kernel", f"crit.out_projs.{i}", "mlm_head"
      )
      for i in own
    ]
  return table


def rows(config: ModelConfig):
  """The `Row` table of a Transformer-XL of ``config`` (``TransfoXLLMHeadModel`` names)."""
  table = []
  for i in range(_input_tables(config)):
    s = adaptive_softmax.suffix(i)
    table.append(
      Row(
        f"bert/word_embedding{s}/embedding",
        f"{_PREFIX}word_emb.emb_layers.{i}.weight",
        weight_table.REQUIRED_GROUP,
      )
    )
    if _projected(config):
      table.append(
        Row(
          f"bert/embedding_projection{s}/kernel",
          f"{_PREFIX}word_emb.emb_projs.{i}",
          weight_table.REQUIRED_GROUP,
          transpose=True,
        )
      )
  if not config.recurrence.untie_r:
    table += [Row(f"bert/{b}", f"{_PREFIX}{b}", weight_table.REQUIRED_GROUP) for b in _BIASES]
  for i in range(config.num_layers):
    ours, theirs = f"bert/layer_{i}/", f"{_PREFIX}layers.{i}."
    table += [
      Row(ours + o, theirs + t, weight_table.REQUIRED_GROUP, heads_axis=axis, transpose=tr)
      for o, t, axis, tr in _LAYER_ROWS
    ]
    if config.recurrence.untie_r:
      table += [
        Row(f"{ours}rel_attn/{b}", f"{theirs}dec_attn.{b}", weight_table.REQUIRED_GROUP)
        for b in _BIASES
      ]
  return table + _softmax_rows(config)


def _tied_copies(config: ModelConfig) -> dict:
  """{copy name: original name} of the tensors transformers stores twice (the ``crit.`` ones
  only in a ``TransfoXLLMHeadModel``)."""
  copies = {
    f"crit.out_layers.{i}.weight": f"{_PREFIX}word_emb.emb_layers.{i}.weight"
    for i in range(_input_tables(config))
  }
  if _projected(config):
    for i in range(len(config.adaptive.cutoffs) + 1):
      if adaptive_config.tied_projection(config, i):
        source = i if config.adaptive.div_val > 1 else 0
        copies[f"crit.out_projs.{i}"] = f"{_PREFIX}word_emb.emb_projs.{source}"
  if not config.recurrence.untie_r:
    copies.update(
      {
        f"{_PREFIX}layers.{i}.dec_attn.{b}": f"{_PREFIX}{b}"
        for i in range(config.num_layers)
        for b in _BIASES
      }
    )
  return copies


@functools.lru_cache(maxsize=8)
def param_shapes(config: ModelConfig) -> dict:
  """{"bert/layer_0/...": shape} of `TransformerXLLMHeadModel`."""
  return weight_table.module_shapes(TransformerXLLMHeadModel(config))


def params_from_hf(state, config: ModelConfig, source: str = "the state dict"):
  """bert_jax params from a Hugging Face Transformer-XL state dict (either class above).

  Raises:
    UserInputError: tensors are missing, unexpected or of another shape (one message), or a
      tied copy differs from its original.
  """
  config = dataclasses.replace(config, dtype="float32")
  layout = HfState(
    rows,
    "Transformer-XL",
    _PREFIX,
    ("word_emb.", "layers.", "pos_emb.", "r_w_bias", "r_r_bias"),  # TransfoXLModel's names.
    tied=_tied_copies(config),
    ignored=(_INV_FREQ,),
    our_shapes=param_shapes,
  )
  return layout.params_from_hf(state, config, source)


def hf_from_params(params, config: ModelConfig):
  """Hugging Face names -> numpy arrays, tied copies and the sinusoid buffer included."""
  state = weight_table.export_params(rows(config), params)
  for copy, original in _tied_copies(config).items():
    if original in state and (not copy.startswith("crit.") or "output_bias" in params):
      state[copy] = state[original]
  width = config.hidden_size
  state[_INV_FREQ] = 1 / (10000 ** (np.arange(0.0, width, 2.0, dtype=np.float32) / width))
  if "output_bias" not in params:
    # A TransfoXLModel directory: its names have no "transformer." prefix.
    state = {name.removeprefix(_PREFIX): value for name, value in state.items()}
  return state


architecture = weight_table.by_head("TransfoXLLMHeadModel", "TransfoXLModel", "output_bias")
