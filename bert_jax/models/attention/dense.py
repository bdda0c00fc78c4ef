"""Dense softmax attention: the reference every other kernel is tested against."""

import jax
import jax.numpy as jnp

from bert_jax.models import dropout as dropout_lib
from bert_jax.models.attention import masks


def dense_attention(
  query_BLHD,
  key_BLHD,
  value_BLHD,
  segment_ids_BL,
  *,
  dropout_rate=0.0,
  dropout_rng=None,
  deterministic=True,
  return_probs=False,
):
  """Scaled dot-product attention with an explicit [B, H, L, L] probability matrix.

  Logits and softmax are computed in float32 whatever the input dtype; the output has the
  dtype of ``value_BLHD``.

  Args:
    query_BLHD: queries [batch, length, heads, head_dim].
    key_BLHD: keys, same shape.
    value_BLHD: values, same shape.
    segment_ids_BL: int [batch, length]; 0 is padding, equal positive ids may attend.
    dropout_rate: dropout on the attention probabilities (BERT uses 0.1).
    dropout_rng: PRNG key for that dropout; needed when it is active.
    deterministic: disables dropout.
    return_probs: also return the float32 probabilities [batch, heads, query, key] (before
      dropout), for inspection.

  Returns:
    Attention output [batch, length, heads, head_dim] (and the probabilities).
  """
  head_dim = query_BLHD.shape[-1]
  logits_BHQK = jnp.einsum(
    "bqhd,bkhd->bhqk", query_BLHD, key_BLHD, preferred_element_type=jnp.float32
  ) / jnp.sqrt(jnp.float32(head_dim))
  mask_B1QK = masks.segment_mask(segment_ids_BL, segment_ids_BL)
  logits_BHQK = jnp.where(mask_B1QK, logits_BHQK, masks.large_negative(jnp.float32))
  probs_BHQK = jax.nn.softmax(logits_BHQK, axis=-1)
  kept_BHQK = probs_BHQK
  if not deterministic and dropout_rate > 0.0:
    kept_BHQK = dropout_lib.dropout(probs_BHQK, dropout_rate, dropout_rng)
  out_BLHD = jnp.einsum("bhqk,bkhd->bqhd", kept_BHQK.astype(value_BLHD.dtype), value_BLHD)
  return (out_BLHD, probs_BHQK) if return_probs else out_BLHD


def fused_attention(query_BLHD, key_BLHD, value_BLHD, segment_ids_BL):
  """Attention through `jax.nn.dot_product_attention` (cuDNN / XLA fused kernels).

  No dropout on the probabilities: the fused kernels do not offer it, which is why the model
  config refuses ``attention_kind='fused'`` with a non-zero attention dropout.
  """
  mask_B1QK = masks.segment_mask(segment_ids_BL, segment_ids_BL)
  return jax.nn.dot_product_attention(query_BLHD, key_BLHD, value_BLHD, mask=mask_B1QK)
