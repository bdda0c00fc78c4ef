"""Hugging Face BERT weights (PyTorch / safetensors names) <-> bert_jax parameters.

The table names each bert_jax parameter's Hugging Face tensor (``BertForPreTraining`` names)
and how the layout differs: PyTorch stores Linear weights as [out, in]; bert_jax keeps the
attention projections per head ([embed, heads, head_dim] and [heads, head_dim, embed]).
Checkpoints of ``BertModel`` (no ``bert.`` prefix, no heads), of ``BertForPreTraining`` and of
``BertForMaskedLM`` all load; old ones with LayerNorm ``gamma`` / ``beta`` names too.
"""

from bert_jax.models.config import ModelConfig
from bert_jax.models.interop import weight_table
from bert_jax.models.interop.hf_state import HfState
from bert_jax.models.interop.weight_table import Row

_PREFIX = "bert."
_TRUNK_PARTS = ("embeddings.", "encoder.", "pooler.")  # BertModel names lack the "bert." prefix.
_WORD_TABLE = "bert.embeddings.word_embeddings.weight"
_MLM_BIAS = "cls.predictions.bias"
# PyTorch ties the MLM decoder to the word table and its bias to cls.predictions.bias; .bin
# files repeat both, safetensors files written by save_pretrained do not.
_TIED_DECODER = {
  "cls.predictions.decoder.weight": _WORD_TABLE,
  "cls.predictions.decoder.bias": _MLM_BIAS,
}
# A buffer (0..max_positions-1) that older versions of transformers saved with the weights.
_IGNORED = ("bert.embeddings.position_ids",)

EMBEDDING_ROWS = weight_table.named_rows(
  "bert/embeddings/",
  weight_table.EMBEDDING_PARAMS,
  [
    _WORD_TABLE,
    "bert.embeddings.position_embeddings.weight",
    "bert.embeddings.token_type_embeddings.weight",
    "bert.embeddings.LayerNorm.weight",
    "bert.embeddings.LayerNorm.bias",
  ],
  "encoder",
)
HEAD_ROWS = (
  [
    Row("bert/pooler/kernel", "bert.pooler.dense.weight", "pooler", transpose=True),
    Row("bert/pooler/bias", "bert.pooler.dense.bias", "pooler"),
  ]
  + weight_table.named_rows(
    "mlm_head/",
    weight_table.MLM_HEAD_PARAMS,
    [
      "cls.predictions.transform.dense.weight",
      "cls.predictions.transform.dense.bias",
      "cls.predictions.transform.LayerNorm.weight",
      "cls.predictions.transform.LayerNorm.bias",
      _MLM_BIAS,
    ],
    "mlm_head",
  )
  + [
    Row("nsp_head/kernel", "cls.seq_relationship.weight", "nsp_head", transpose=True),
    Row("nsp_head/bias", "cls.seq_relationship.bias", "nsp_head"),
  ]
)
# Hugging Face's names of `weight_table.ENCODER_LAYER_PARAMS` inside ``layer.<i>.``.
_LAYER_NAMES = (
  "attention.self.query.weight",
  "attention.self.query.bias",
  "attention.self.key.weight",
  "attention.self.key.bias",
  "attention.self.value.weight",
  "attention.self.value.bias",
  "attention.output.dense.weight",
  "attention.output.dense.bias",
  "attention.output.LayerNorm.weight",
  "attention.output.LayerNorm.bias",
  "intermediate.dense.weight",
  "intermediate.dense.bias",
  "output.dense.weight",
  "output.dense.bias",
  "output.LayerNorm.weight",
  "output.LayerNorm.bias",
)


def layer_rows(ours: str, theirs: str, num_layers: int, group: str):
  """Rows of ``num_layers`` BERT encoder layers: ours ``<ours>/layer_<i>/...``, theirs
  ``<theirs>.<i>....`` (other families with BERT's layers, e.g. ELECTRA, reuse them)."""
  layers = [(f"{ours}/layer_{i}/", f"{theirs}.{i}.") for i in range(num_layers)]
  return weight_table.encoder_layer_rows(layers, _LAYER_NAMES, transposed=True, group=group)


def rows(config: ModelConfig):
  """The `Row` table of a BERT of ``config``'s depth."""
  encoder_rows = layer_rows("bert/encoder", "bert.encoder.layer", config.num_layers, "encoder")
  return EMBEDDING_ROWS + encoder_rows + HEAD_ROWS


def hf_state(our_shapes) -> HfState:
  """BERT's state dicts as an `HfState` (``bert.`` prefix, tied MLM decoder, the position-id
  buffer), with the params' shapes from ``our_shapes`` (``ModelConfig -> {path: shape}``, the
  pretraining model's, e.g. `weight_table.param_shapes` of it)."""
  return HfState(
    rows,
    "BERT",
    _PREFIX,
    _TRUNK_PARTS,
    tied=_TIED_DECODER,
    ignored=_IGNORED,
    our_shapes=our_shapes,
  )
