"""Original Google TF BERT checkpoint variables <-> bert_jax parameters.

Names are those of google-research/bert's ``modeling.py`` and ``run_pretraining.py``
(``bert/encoder/layer_0/attention/self/query/kernel``, ``cls/predictions/output_bias``, ...).
TF Dense kernels are [in, out] like ours, so only the attention projections change layout
(heads merged into one axis) and the NSP ``output_weights``, which TF stores as [2, hidden].
Adam slots (``.../adam_m``, ``.../adam_v``) and ``global_step`` are skipped.
"""

from bert_jax.models.config import ModelConfig
from bert_jax.models.interop import weight_table
from bert_jax.models.interop.weight_table import Row

_OPTIMIZER_SLOTS = ("adam_m", "adam_v")
_BOOKKEEPING = ("global_step", "_CHECKPOINTABLE_OBJECT_GRAPH")

_FIXED_ROWS = (
  Row("bert/embeddings/word_embeddings/embedding", "bert/embeddings/word_embeddings", "encoder"),
  Row(
    "bert/embeddings/position_embeddings/embedding",
    "bert/embeddings/position_embeddings",
    "encoder",
  ),
  Row(
    "bert/embeddings/token_type_embeddings/embedding",
    "bert/embeddings/token_type_embeddings",
    "encoder",
  ),
  Row("bert/embeddings/layer_norm/scale", "bert/embeddings/LayerNorm/gamma", "encoder"),
  Row("bert/embeddings/layer_norm/bias", "bert/embeddings/LayerNorm/beta", "encoder"),
  Row("bert/pooler/kernel", "bert/pooler/dense/kernel", "pooler"),
  Row("bert/pooler/bias", "bert/pooler/dense/bias", "pooler"),
  Row("mlm_head/transform/kernel", "cls/predictions/transform/dense/kernel", "mlm_head"),
  Row("mlm_head/transform/bias", "cls/predictions/transform/dense/bias", "mlm_head"),
  Row("mlm_head/transform_norm/scale", "cls/predictions/transform/LayerNorm/gamma", "mlm_head"),
  Row("mlm_head/transform_norm/bias", "cls/predictions/transform/LayerNorm/beta", "mlm_head"),
  Row("mlm_head/output_bias", "cls/predictions/output_bias", "mlm_head"),
  Row("nsp_head/kernel", "cls/seq_relationship/output_weights", "nsp_head", transpose=True),
  Row("nsp_head/bias", "cls/seq_relationship/output_bias", "nsp_head"),
)
# The original TF BERT's names of `weight_table.ENCODER_LAYER_PARAMS` inside ``layer_<i>/``;
# TF stores kernels [in, out] as bert_jax does.
_LAYER_NAMES = (
  "attention/self/query/kernel",
  "attention/self/query/bias",
  "attention/self/key/kernel",
  "attention/self/key/bias",
  "attention/self/value/kernel",
  "attention/self/value/bias",
  "attention/output/dense/kernel",
  "attention/output/dense/bias",
  "attention/output/LayerNorm/gamma",
  "attention/output/LayerNorm/beta",
  "intermediate/dense/kernel",
  "intermediate/dense/bias",
  "output/dense/kernel",
  "output/dense/bias",
  "output/LayerNorm/gamma",
  "output/LayerNorm/beta",
)


def rows(config: ModelConfig):
  """The `Row` table of a BERT of ``config``'s depth."""
  layers = [(f"bert/encoder/layer_{i}/",) * 2 for i in range(config.num_layers)]
  layer_rows = weight_table.encoder_layer_rows(layers, _LAYER_NAMES, transposed=False)
  return list(_FIXED_ROWS[:5]) + layer_rows + list(_FIXED_ROWS[5:])


def _is_bookkeeping(name: str) -> bool:
  return name.rsplit("/", 1)[-1] in _OPTIMIZER_SLOTS or name in _BOOKKEEPING


def params_from_tf(variable_shapes, read, config: ModelConfig, source: str, our_shapes):
  """Builds bert_jax params (unscanned layout) from a TF BERT checkpoint.

  Args:
    variable_shapes: variable name -> shape, as ``CheckpointReader.get_variable_to_shape_map``.
    read: variable name -> numpy array (``CheckpointReader.get_tensor``).
    config: the model of the checkpoint's ``bert_config.json``.
    source: the checkpoint path, for error messages.
    our_shapes: path -> shape of the params (`weight_table.param_shapes` of the family's
      pretraining model).

  Returns:
    Nested dict of float32 numpy arrays (``bert``, and the heads the checkpoint has).

  Raises:
    UserInputError: variables are missing, unexpected or of another shape (one message).
  """
  ignored = frozenset(name for name in variable_shapes if _is_bookkeeping(name))
  return weight_table.import_params(
    rows(config),
    variable_shapes,
    read,
    config,
    source=source,
    our_shapes=our_shapes,
    ignored=ignored,
  )
