"""Hugging Face BERT weights (PyTorch / safetensors names) <-> bert_jax parameters.

The mapping is a table: each row names a bert_jax parameter, the Hugging Face tensor it comes
from, and how the array is laid out differently (PyTorch stores Linear weights as [out, in];
bert_jax keeps attention projections per head, [embed, heads, head_dim]).
"""

import numpy as np

from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig

# (bert_jax path, Hugging Face name, layout). "{i}" is the layer index.
_EMBEDDING_ROWS = (
    ("bert/embeddings/word_embeddings/embedding", "bert.embeddings.word_embeddings.weight", "same"),
    ("bert/embeddings/position_embeddings/embedding", "bert.embeddings.position_embeddings.weight",
     "same"),
    ("bert/embeddings/token_type_embeddings/embedding",
     "bert.embeddings.token_type_embeddings.weight", "same"),
    ("bert/embeddings/layer_norm/scale", "bert.embeddings.LayerNorm.weight", "same"),
    ("bert/embeddings/layer_norm/bias", "bert.embeddings.LayerNorm.bias", "same"),
    ("bert/pooler/kernel", "bert.pooler.dense.weight", "linear"),
    ("bert/pooler/bias", "bert.pooler.dense.bias", "same"),
)
_LAYER_ROWS = (
    ("attention/query/kernel", "attention.self.query.weight", "heads_in"),
    ("attention/query/bias", "attention.self.query.bias", "heads_bias"),
    ("attention/key/kernel", "attention.self.key.weight", "heads_in"),
    ("attention/key/bias", "attention.self.key.bias", "heads_bias"),
    ("attention/value/kernel", "attention.self.value.weight", "heads_in"),
    ("attention/value/bias", "attention.self.value.bias", "heads_bias"),
    ("attention/output/kernel", "attention.output.dense.weight", "heads_out"),
    ("attention/output/bias", "attention.output.dense.bias", "same"),
    ("attention_norm/scale", "attention.output.LayerNorm.weight", "same"),
    ("attention_norm/bias", "attention.output.LayerNorm.bias", "same"),
    ("intermediate/kernel", "intermediate.dense.weight", "linear"),
    ("intermediate/bias", "intermediate.dense.bias", "same"),
    ("output/kernel", "output.dense.weight", "linear"),
    ("output/bias", "output.dense.bias", "same"),
    ("output_norm/scale", "output.LayerNorm.weight", "same"),
    ("output_norm/bias", "output.LayerNorm.bias", "same"),
)
_PRETRAINING_HEAD_ROWS = (
    ("mlm_head/transform/kernel", "cls.predictions.transform.dense.weight", "linear"),
    ("mlm_head/transform/bias", "cls.predictions.transform.dense.bias", "same"),
    ("mlm_head/transform_norm/scale", "cls.predictions.transform.LayerNorm.weight", "same"),
    ("mlm_head/transform_norm/bias", "cls.predictions.transform.LayerNorm.bias", "same"),
    ("mlm_head/output_bias", "cls.predictions.bias", "same"),
    ("nsp_head/kernel", "cls.seq_relationship.weight", "linear"),
    ("nsp_head/bias", "cls.seq_relationship.bias", "same"),
)


def _rows(config: ModelConfig, with_heads: bool):
  rows = list(_EMBEDDING_ROWS)
  for i in range(config.num_layers):
    rows += [(f"bert/encoder/layer_{i}/{ours}", f"bert.encoder.layer.{i}.{theirs}", layout)
             for ours, theirs, layout in _LAYER_ROWS]
  if with_heads:
    rows += list(_PRETRAINING_HEAD_ROWS)
  return rows


def _to_ours(array, layout, config: ModelConfig):
  heads, head_dim = config.num_heads, config.head_dim
  if layout == "linear":
    return array.T
  if layout == "heads_in":  # [H*Dh, D] -> [D, H, Dh]
    return array.T.reshape(array.shape[1], heads, head_dim)
  if layout == "heads_out":  # [D, H*Dh] -> [H, Dh, D]
    return array.T.reshape(heads, head_dim, array.shape[0])
  if layout == "heads_bias":
    return array.reshape(heads, head_dim)
  return array


def _to_theirs(array, layout):
  if layout == "linear":
    return array.T
  if layout == "heads_in":
    return array.reshape(array.shape[0], -1).T
  if layout == "heads_out":
    return array.reshape(-1, array.shape[-1]).T
  if layout == "heads_bias":
    return array.reshape(-1)
  return array


def _strip_bert_prefix(name: str) -> str:
  return name[len("bert."):] if name.startswith("bert.") else name


def params_from_hf(state, config: ModelConfig, with_heads: bool = True):
  """Builds bert_jax params (unscanned layout) from a Hugging Face BERT state dict.

  Args:
    state: mapping from Hugging Face tensor names to arrays (``BertForPreTraining`` names, or
      ``BertModel`` names without the ``bert.`` prefix).
    config: the bert_jax model config the weights must fit.
    with_heads: also map the MLM and NSP heads (``BertForPreTraining`` checkpoints).

  Returns:
    Nested dict of float32 numpy arrays.
  """
  by_name = {_strip_bert_prefix(k): v for k, v in state.items()}
  params, missing = {}, []
  for ours, theirs, layout in _rows(config, with_heads):
    array = by_name.get(_strip_bert_prefix(theirs))
    if array is None:
      missing.append(theirs)
      continue
    node = params
    *parents, leaf = ours.split("/")
    for key in parents:
      node = node.setdefault(key, {})
    node[leaf] = np.asarray(_to_ours(np.asarray(array, np.float32), layout, config))
  if missing:
    raise UserInputError(f"Hugging Face weights lack {len(missing)} tensors the model needs, "
                         f"e.g. {missing[:3]}; check the checkpoint's architecture and size")
  return params


def hf_from_params(params, config: ModelConfig, with_heads: bool = True):
  """The inverse of `params_from_hf`: a flat dict of Hugging Face names to numpy arrays."""
  state = {}
  for ours, theirs, layout in _rows(config, with_heads):
    node = params
    for key in ours.split("/"):
      node = node[key]
    state[theirs] = np.asarray(_to_theirs(np.asarray(node), layout))
  if with_heads:  # PyTorch ties the decoder to the word table and keeps its bias twice.
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
    state["cls.predictions.decoder.bias"] = state["cls.predictions.bias"]
  return state
