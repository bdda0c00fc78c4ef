"""Hugging Face ALBERT weights (``AlbertForPreTraining`` names) <-> bert_jax parameters.

Layer rows depend on the sharing mode: ``all`` maps the one shared block to Hugging Face's
group 0, ``none`` layer i to group i (`hf_config` refuses other groupings). ``AlbertModel``
checkpoints (no ``albert.`` prefix, no heads) and ``AlbertForMaskedLM`` ones (no SOP head) load
too; the MLM decoder is tied to the word table and its bias to ``predictions.bias``.
"""

import functools

from bert_jax.models.albert.model import AlbertForPreTraining
from bert_jax.models.config import ModelConfig
from bert_jax.models.interop import hf_weights, weight_table
from bert_jax.models.interop.hf_state import HfState
from bert_jax.models.interop.weight_table import Row

_PREFIX = "albert."
_TRUNK_PARTS = ("embeddings.", "encoder.", "pooler.")  # AlbertModel names lack the prefix.
_WORD_TABLE = "albert.embeddings.word_embeddings.weight"
_MLM_BIAS = "predictions.bias"
_TIED_DECODER = {"predictions.decoder.weight": _WORD_TABLE, "predictions.decoder.bias": _MLM_BIAS}
_IGNORED = ("albert.embeddings.position_ids",)
_GROUP = "albert.encoder.albert_layer_groups.{}.albert_layers.0."

# BERT's rows (`hf_weights`) under ALBERT's names, plus the projection of the embeddings.
_FIXED_ROWS = weight_table.renamed(hf_weights.EMBEDDING_ROWS, {"bert.": _PREFIX}) + [
  Row(
    "bert/embedding_projection/kernel",
    "albert.encoder.embedding_hidden_mapping_in.weight",
    "encoder",
    transpose=True,
  ),
  Row(
    "bert/embedding_projection/bias", "albert.encoder.embedding_hidden_mapping_in.bias", "encoder"
  ),
]
_HEAD_ROWS = weight_table.renamed(
  hf_weights.HEAD_ROWS,
  {
    "bert.pooler.dense.": "albert.pooler.",
    "cls.predictions.transform.dense.": "predictions.dense.",
    "cls.predictions.transform.LayerNorm.": "predictions.LayerNorm.",
    "cls.predictions.bias": _MLM_BIAS,
    "cls.seq_relationship.": "sop_classifier.classifier.",
  },
  groups={"nsp_head": "sop_head"},
)
# ALBERT's names of `weight_table.ENCODER_LAYER_PARAMS` inside an ``AlbertLayer``.
_LAYER_NAMES = (
  "attention.query.weight",
  "attention.query.bias",
  "attention.key.weight",
  "attention.key.bias",
  "attention.value.weight",
  "attention.value.bias",
  "attention.dense.weight",
  "attention.dense.bias",
  "attention.LayerNorm.weight",
  "attention.LayerNorm.bias",
  "ffn.weight",
  "ffn.bias",
  "ffn_output.weight",
  "ffn_output.bias",
  "full_layer_layer_norm.weight",
  "full_layer_layer_norm.bias",
)


def rows(config: ModelConfig):
  """The `Row` table of an ALBERT of ``config``'s depth and sharing (``all`` or ``none``)."""
  if config.albert.layer_sharing == "all":
    blocks = [("bert/encoder/shared/layer/", _GROUP.format(0))]
  else:
    blocks = [(f"bert/encoder/layer_{i}/", _GROUP.format(i)) for i in range(config.num_layers)]
  layer_rows = weight_table.encoder_layer_rows(blocks, _LAYER_NAMES, transposed=True)
  return _FIXED_ROWS + layer_rows + _HEAD_ROWS


_STATE = HfState(
  rows,
  "ALBERT",
  _PREFIX,
  _TRUNK_PARTS,
  tied=_TIED_DECODER,
  ignored=_IGNORED,
  our_shapes=functools.partial(weight_table.param_shapes, AlbertForPreTraining),
)
params_from_hf = _STATE.params_from_hf
hf_from_params = _STATE.hf_from_params


def architecture(params) -> str:
  """The ``transformers`` class whose layout ``params`` fills."""
  if "mlm_head" in params:
    return "AlbertForPreTraining" if "sop_head" in params else "AlbertForMaskedLM"
  return "AlbertModel"
