"""Hugging Face BERT weights (PyTorch / safetensors names) <-> bert_jax parameters.

The table names each bert_jax parameter's Hugging Face tensor (``BertForPreTraining`` names)
and how the layout differs: PyTorch stores Linear weights as [out, in]; bert_jax keeps the
attention projections per head ([embed, heads, head_dim] and [heads, head_dim, embed]).
Checkpoints of ``BertModel`` (no ``bert.`` prefix, no heads), of ``BertForPreTraining`` and of
``BertForMaskedLM`` all load; old ones with LayerNorm ``gamma`` / ``beta`` names too.
"""

from bert_jax.models.config import ModelConfig
from bert_jax.models.interop import weight_table
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

_FIXED_ROWS = (
  Row("bert/embeddings/word_embeddings/embedding", _WORD_TABLE, "encoder"),
  Row(
    "bert/embeddings/position_embeddings/embedding",
    "bert.embeddings.position_embeddings.weight",
    "encoder",
  ),
  Row(
    "bert/embeddings/token_type_embeddings/embedding",
    "bert.embeddings.token_type_embeddings.weight",
    "encoder",
  ),
  Row("bert/embeddings/layer_norm/scale", "bert.embeddings.LayerNorm.weight", "encoder"),
  Row("bert/embeddings/layer_norm/bias", "bert.embeddings.LayerNorm.bias", "encoder"),
  Row("bert/pooler/kernel", "bert.pooler.dense.weight", "pooler", transpose=True),
  Row("bert/pooler/bias", "bert.pooler.dense.bias", "pooler"),
  Row(
    "mlm_head/transform/kernel",
    "cls.predictions.transform.dense.weight",
    "mlm_head",
    transpose=True,
  ),
  Row("mlm_head/transform/bias", "cls.predictions.transform.dense.bias", "mlm_head"),
  Row("mlm_head/transform_norm/scale", "cls.predictions.transform.LayerNorm.weight", "mlm_head"),
  Row("mlm_head/transform_norm/bias", "cls.predictions.transform.LayerNorm.bias", "mlm_head"),
  Row("mlm_head/output_bias", _MLM_BIAS, "mlm_head"),
  Row("nsp_head/kernel", "cls.seq_relationship.weight", "nsp_head", transpose=True),
  Row("nsp_head/bias", "cls.seq_relationship.bias", "nsp_head"),
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
  return list(_FIXED_ROWS[:5]) + encoder_rows + list(_FIXED_ROWS[5:])


def _canonical(name: str) -> str:
  """``BertForPreTraining``'s name for a tensor of any BERT checkpoint flavour."""
  if name.startswith(_TRUNK_PARTS):
    name = _PREFIX + name
  if ".LayerNorm." in name:
    name = name.replace(".LayerNorm.gamma", ".LayerNorm.weight").replace(
      ".LayerNorm.beta", ".LayerNorm.bias"
    )
  return name


def params_from_hf(state, config: ModelConfig, source: str = "the state dict"):
  """Builds bert_jax params (unscanned layout) from a Hugging Face BERT state dict.

  Args:
    state: mapping from Hugging Face tensor names to arrays.
    config: the bert_jax model config the weights must fit.
    source: where ``state`` came from, for error messages.

  Returns:
    Nested dict of float32 numpy arrays: ``bert`` (with ``pooler`` if the checkpoint has
    one), plus ``mlm_head`` / ``nsp_head`` when it has them.

  Raises:
    UserInputError: tensors are missing, unexpected or of another shape (one message), or a
      tied tensor differs from the one it should repeat.
  """
  tensors = {_canonical(name): value for name, value in state.items()}
  weight_table.fold_tied_copies(tensors, _TIED_DECODER, source, "BERT")
  return weight_table.import_state(
    rows(config),
    tensors,
    config,
    source=source,
    ignored=frozenset(_TIED_DECODER) | frozenset(_IGNORED),
  )


def hf_from_params(params, config: ModelConfig):
  """The inverse of `params_from_hf`: Hugging Face names -> numpy arrays.

  The names are those ``save_pretrained`` writes to ``model.safetensors`` (tied copies of the
  word table and the MLM bias left out), for the parts ``params`` holds.
  """
  return weight_table.export_params(rows(config), params)
