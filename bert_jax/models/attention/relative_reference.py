"""A slow, literal relative attention: the reference `relative.relative_attention` is tested
against (outputs and gradients).

It builds the [Q, K, heads, head_dim] tensor of each pair's distance encoding by indexing with
the distance itself, and the segment embedding of each pair by indexing with the pair's
same/different flag, so no shift or reshape trick is involved.
"""

import jax
import jax.numpy as jnp

from bert_jax.models import dropout as dropout_lib


def reference_relative_attention(
  query_BQHD,
  key_BKHD,
  value_BKHD,
  position_key_PHD,
  content_bias_HD,
  position_bias_HD,
  mask_BQK,
  *,
  segment_differs_BQK=None,
  segment_bias_HD=None,
  segment_embed_2HD=None,
  dropout_rate: float = 0.0,
  dropout_rng=None,
  deterministic: bool = True,
):
  """Same arguments and result as `relative.relative_attention`, computed pair by pair."""
  query_len, key_len = query_BQHD.shape[1], key_BKHD.shape[1]
  memory_len = key_len - query_len
  f32 = jnp.float32
  q_BQHD, k_BKHD, v_BKHD = (x.astype(f32) for x in (query_BQHD, key_BKHD, value_BKHD))
  # Query i is at absolute position memory_len + i; row p of the encodings is distance K - p.
  distance_QK = (memory_len + jnp.arange(query_len))[:, None] - jnp.arange(key_len)[None, :]
  r_QKHD = position_key_PHD.astype(f32)[key_len - distance_QK]
  content_BHQK = jnp.einsum("bqhd,bkhd->bhqk", q_BQHD + content_bias_HD[None, None], k_BKHD)
  position_BHQK = jnp.einsum("bqhd,qkhd->bhqk", q_BQHD + position_bias_HD[None, None], r_QKHD)
  scores_BHQK = content_BHQK + position_BHQK
  if segment_differs_BQK is not None:
    e_BQKHD = segment_embed_2HD.astype(f32)[segment_differs_BQK.astype(jnp.int32)]
    scores_BHQK = scores_BHQK + jnp.einsum(
      "bqhd,bqkhd->bhqk", q_BQHD + segment_bias_HD[None, None], e_BQKHD
    )
  scores_BHQK = scores_BHQK / jnp.sqrt(f32(query_BQHD.shape[-1]))
  scores_BHQK = jnp.where(mask_BQK[:, None], scores_BHQK, -1e30)
  probs_BHQK = jax.nn.softmax(scores_BHQK, axis=-1)
  if not deterministic and dropout_rate > 0.0:
    probs_BHQK = dropout_lib.dropout(probs_BHQK, dropout_rate, dropout_rng)
  return jnp.einsum("bhqk,bkhd->bqhd", probs_BHQK, v_BKHD).astype(value_BKHD.dtype)
