"""Hugging Face ALBERT weights (``AlbertForPreTraining`` names) <-> bert_jax parameters.

Layer rows depend on the sharing mode: ``all`` maps the one shared block to Hugging Face's
group 0, ``none`` layer i to group i (`hf_config` refuses other groupings). ``AlbertModel``
checkpoints (no ``albert.`` prefix, no heads) and ``AlbertForMaskedLM`` ones (no SOP head) load
too; the MLM decoder is tied to the word table and its bias to ``predictions.bias``.
"""

from bert_jax.models.config import ModelConfig
from bert_jax.models.interop import weight_table
from bert_jax.models.interop.weight_table import Row

_PREFIX = "albert."
_TRUNK_PARTS = ("embeddings.", "encoder.", "pooler.")  # AlbertModel names lack the prefix.
_WORD_TABLE = "albert.embeddings.word_embeddings.weight"
_MLM_BIAS = "predictions.bias"
_TIED_DECODER = {"predictions.decoder.weight": _WORD_TABLE, "predictions.decoder.bias": _MLM_BIAS}
_IGNORED = ("albert.embeddings.position_ids",)
_EMBEDDINGS = "albert.embeddings."
_GROUP = "albert.encoder.albert_layer_groups.{}.albert_layers.0."

_FIXED_ROWS = (
  Row("bert/embeddings/word_embeddings/embedding", _WORD_TABLE, "encoder"),
  Row(
    "bert/embeddings/position_embeddings/embedding",
    _EMBEDDINGS + "position_embeddings.weight",
    "encoder",
  ),
  Row(
    "bert/embeddings/token_type_embeddings/embedding",
    _EMBEDDINGS + "token_type_embeddings.weight",
    "encoder",
  ),
  Row("bert/embeddings/layer_norm/scale", _EMBEDDINGS + "LayerNorm.weight", "encoder"),
  Row("bert/embeddings/layer_norm/bias", _EMBEDDINGS + "LayerNorm.bias", "encoder"),
  Row(
    "bert/embedding_projection/kernel",
    "albert.encoder.embedding_hidden_mapping_in.weight",
    "encoder",
    transpose=True,
  ),
  Row(
    "bert/embedding_projection/bias", "albert.encoder.embedding_hidden_mapping_in.bias", "encoder"
  ),
)
_HEAD_ROWS = (
  Row("bert/pooler/kernel", "albert.pooler.weight", "pooler", transpose=True),
  Row("bert/pooler/bias", "albert.pooler.bias", "pooler"),
  Row("mlm_head/transform/kernel", "predictions.dense.weight", "mlm_head", transpose=True),
  Row("mlm_head/transform/bias", "predictions.dense.bias", "mlm_head"),
  Row("mlm_head/transform_norm/scale", "predictions.LayerNorm.weight", "mlm_head"),
  Row("mlm_head/transform_norm/bias", "predictions.LayerNorm.bias", "mlm_head"),
  Row("mlm_head/output_bias", _MLM_BIAS, "mlm_head"),
  Row("sop_head/kernel", "sop_classifier.classifier.weight", "sop_head", transpose=True),
  Row("sop_head/bias", "sop_classifier.classifier.bias", "sop_head"),
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
  return list(_FIXED_ROWS) + layer_rows + list(_HEAD_ROWS)


def _canonical(name: str) -> str:
  return _PREFIX + name if name.startswith(_TRUNK_PARTS) else name


def params_from_hf(state, config: ModelConfig, source: str = "the state dict"):
  """Builds bert_jax params (family albert, unscanned) from a Hugging Face ALBERT state dict.

  Returns:
    Nested dict of float32 numpy arrays: ``bert`` (with ``pooler`` if the checkpoint has one),
    plus ``mlm_head`` / ``sop_head`` when it has them.

  Raises:
    UserInputError: tensors missing, unexpected or of another shape (one message), or an
      untied MLM decoder.
  """
  tensors = {_canonical(name): value for name, value in state.items()}
  weight_table.fold_tied_copies(tensors, _TIED_DECODER, source, "ALBERT")
  return weight_table.import_state(
    rows(config),
    tensors,
    config,
    source=source,
    ignored=frozenset(_TIED_DECODER) | frozenset(_IGNORED),
  )


def hf_from_params(params, config: ModelConfig):
  """The inverse of `params_from_hf`: ``AlbertForPreTraining`` names -> numpy arrays."""
  return weight_table.export_params(rows(config), params)


def architecture(params) -> str:
  """The ``transformers`` class whose layout ``params`` fills."""
  if "mlm_head" in params:
    return "AlbertForPreTraining" if "sop_head" in params else "AlbertForMaskedLM"
  return "AlbertModel"
