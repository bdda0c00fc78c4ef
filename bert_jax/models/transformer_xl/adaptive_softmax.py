"""The projected adaptive log-softmax of transformers' ``ProjectedAdaptiveLogSoftmax``.

The head cluster's softmax scores its tokens and one entry per tail cluster (``cluster_weight``,
``cluster_bias``); a tail token's log-probability is its cluster's head entry plus its
log-softmax within the cluster. Each cluster first projects the hidden state to its table's
width (``output_projection`` for cluster 0, ``output_projection_i`` after it) unless the cluster
ties it to its input projection (``model.adaptive.tie_projs``) or there is none (one table as
wide as the model). Word tables are the input ones (tied); the biases are the softmax's own:
``output_bias`` over the whole vocabulary with one table, per cluster (``output_bias_i``) with
``div_val`` > 1. Options: `adaptive_config.py`.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import layers
from bert_jax.models.config import ModelConfig
from bert_jax.models.transformer_xl import adaptive_config


def suffix(cluster: int) -> str:
  """The parameter-name suffix of an adaptive cluster ("" for the head, "_i" after it)."""
  return f"_{cluster}" if cluster else ""


def project(config: ModelConfig, cluster: int, x_BLD, input_kernel_ED, width: int):
  """The hidden state in cluster ``cluster``'s table width (or as is, when there is none);
  called inside the LM's compact ``__call__``, so an untied projection is its submodule."""
  if input_kernel_ED is None:
    return x_BLD
  if adaptive_config.tied_projection(config, cluster):
    return jnp.einsum("bld,ed->ble", x_BLD, input_kernel_ED.astype(x_BLD.dtype))
  return nn.Dense(
    width,
    use_bias=False,
    dtype=jnp.dtype(config.dtype),
    param_dtype=jnp.float32,
    kernel_init=layers.normal_init(config, (names.EMBED, None)),
    name=f"output_projection{suffix(cluster)}",
  )(x_BLD)


def log_probs(module, config: ModelConfig, x_BLD, tables):
  """float32 log-probabilities [B, L, V] of the adaptive softmax, its params on ``module``.

  Args:
    module: the (compact) LM module that holds the softmax's parameters.
    config: the model (``model.adaptive.cutoffs`` non-empty).
    x_BLD: the final hidden states.
    tables: per cluster, (word table [ids, E_i], input projection kernel [E_i, D] or None),
      as `transformer_xl.TransformerXLEncoder.output_tables` returns them.
  """
  clusters = adaptive_config.clusters(config)
  shortlist = clusters[0][1]
  tails = len(clusters) - 1
  single = config.adaptive.div_val == 1
  zeros = layers.zeros_init((names.VOCAB,))
  if single:
    bias_V = module.param("output_bias", zeros, (config.vocab_size,), jnp.float32)
  cluster_weight_CE = module.param(
    "cluster_weight", layers.normal_init(config, (None, names.EMBED)), (tails, clusters[0][2]),
    jnp.float32,
  )  # fmt: skip
  cluster_bias_C = module.param("cluster_bias", zeros, (tails,), jnp.float32)
  pieces, head_lp_BLH = [], None
  for i, ((start, end, width), (table_VE, kernel_ED)) in enumerate(zip(clusters, tables)):
    if single:
      b_V = bias_V[start:end]
    else:
      b_V = module.param(f"output_bias{suffix(i)}", zeros, (end - start,), jnp.float32)
    if i == 0:
      table_VE = jnp.concatenate([table_VE, cluster_weight_CE], axis=0)
      b_V = jnp.concatenate([b_V, cluster_bias_C])
    h_BLE = project(config, i, x_BLD, kernel_ED, width)
    logits_BLV = jnp.einsum(
      "ble,ve->blv", h_BLE, table_VE.astype(h_BLE.dtype), preferred_element_type=jnp.float32
    )
    lp_BLV = jax.nn.log_softmax(logits_BLV + b_V[None, None, :])
    if i == 0:
      head_lp_BLH = lp_BLV
      pieces.append(lp_BLV[..., :shortlist])
    else:
      pieces.append(lp_BLV + head_lp_BLH[..., shortlist + i - 1, None])
  return jnp.concatenate(pieces, axis=-1)
