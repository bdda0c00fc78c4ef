"""Relative positional attention (Dai et al. 2019; XLNet's form): a pure kernel.

The score of query i and key j is the sum of four terms (Transformer-XL's a-d) plus XLNet's
optional relative segment term (e):

    (q_i + u) . k_j            content, with the global content bias u
  + (q_i + v) . r_{i-j}        position, with the global position bias v
  + (q_i + s) . e_{s(i,j)}     segment: e_0 if i and j share a segment, e_1 if not

scaled by 1 / sqrt(head_dim). Keys are ``[memory; current]``: query i sits at absolute
position ``mem_len + i``. The position term is computed for every (query, relative distance)
pair, [B, H, Q, K + Q], and turned into [B, H, Q, K] by the relative shift (a reshape that
moves row i left by Q - i), so no [Q, K, head_dim] tensor of per-pair encodings ever exists.
"""

import jax
import jax.numpy as jnp

from bert_jax.models import dropout as dropout_lib
from bert_jax.models.attention import masks


def relative_distances(query_len: int, key_len: int, clamp_len: int = -1):
  """The distances the encodings stand for: key_len, key_len - 1, ..., -query_len + 1.

  Row p of `sinusoid_encodings` encodes distance ``key_len - p`` (XLNet's bidirectional
  convention); ``clamp_len > 0`` clips distances to [-clamp_len, clamp_len].
  """
  distances_P = jnp.arange(key_len, -query_len, -1, dtype=jnp.float32)
  if clamp_len > 0:
    distances_P = jnp.clip(distances_P, -clamp_len, clamp_len)
  return distances_P


def sinusoid_encodings(distances_P, width: int):
  """Transformer-XL's encodings [P, width]: sin of distance * inv_freq, then cos (float32)."""
  inv_freq_F = 1.0 / (10000.0 ** (jnp.arange(0, width, 2, dtype=jnp.float32) / width))
  angles_PF = distances_P[:, None] * inv_freq_F[None, :]
  return jnp.concatenate([jnp.sin(angles_PF), jnp.cos(angles_PF)], axis=-1)


def relative_shift(scores_BHQP, key_len: int):
  """[B, H, Q, K + Q] scores by distance row -> [B, H, Q, K] scores by key.

  Entry (i, j) of the result is entry (i, Q - i + j) of the input, i.e. the encoding of
  distance ``(K - Q + i) - j``: query i's absolute position minus key j's. Done with reshapes
  and one slice (Dai et al.'s trick) instead of a gather.
  """
  batch, heads, query_len, positions = scores_BHQP.shape
  flipped_BHPQ = scores_BHQP.reshape(batch, heads, positions, query_len)
  dropped_BHPQ = flipped_BHPQ[:, :, 1:, :]
  shifted_BHQP = dropped_BHPQ.reshape(batch, heads, query_len, positions - 1)
  return shifted_BHQP[:, :, :, :key_len]


def relative_attention(
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
  """Relative positional attention of Q queries over K = memory + Q keys.

  Scores, softmax and the mask are float32 whatever the input dtype; the output has the dtype
  of ``value_BKHD``.

  Args:
    query_BQHD: queries [batch, query_len, heads, head_dim].
    key_BKHD: keys over ``[memory; current]`` [batch, key_len, heads, head_dim].
    value_BKHD: values, like the keys.
    position_key_PHD: projected encodings of the distances of `relative_distances`
      [key_len + query_len, heads, head_dim].
    content_bias_HD: u.
    position_bias_HD: v.
    mask_BQK: bool, True where query i may attend to key j. A row with no key allowed
      attends uniformly (as XLNet's additive -1e30 mask does).
    segment_differs_BQK: bool, True where i and j are in different segments; None leaves
      out the segment term.
    segment_bias_HD: s (needed with ``segment_differs_BQK``).
    segment_embed_2HD: e_0 (same segment) and e_1 (different).
    dropout_rate: dropout on the attention probabilities.
    dropout_rng: PRNG key for that dropout.
    deterministic: disables dropout.

  Returns:
    Attention output [batch, query_len, heads, head_dim].
  """
  key_len = key_BKHD.shape[1]
  head_dim = query_BQHD.shape[-1]
  f32 = jnp.float32
  content_BHQK = jnp.einsum(
    "bqhd,bkhd->bhqk",
    query_BQHD + content_bias_HD.astype(query_BQHD.dtype)[None, None],
    key_BKHD,
    preferred_element_type=f32,
  )
  by_distance_BHQP = jnp.einsum(
    "bqhd,phd->bhqp",
    query_BQHD + position_bias_HD.astype(query_BQHD.dtype)[None, None],
    position_key_PHD.astype(query_BQHD.dtype),
    preferred_element_type=f32,
  )
  scores_BHQK = content_BHQK + relative_shift(by_distance_BHQP, key_len)
  if segment_differs_BQK is not None:
    by_segment_BQH2 = jnp.einsum(
      "bqhd,shd->bqhs",
      query_BQHD + segment_bias_HD.astype(query_BQHD.dtype)[None, None],
      segment_embed_2HD.astype(query_BQHD.dtype),
      preferred_element_type=f32,
    )
    by_segment_BHQ2 = jnp.transpose(by_segment_BQH2, (0, 2, 1, 3))
    scores_BHQK = scores_BHQK + jnp.where(
      segment_differs_BQK[:, None, :, :],
      by_segment_BHQ2[:, :, :, 1:2],
      by_segment_BHQ2[:, :, :, 0:1],
    )
  scores_BHQK = scores_BHQK / jnp.sqrt(f32(head_dim))
  scores_BHQK = jnp.where(mask_BQK[:, None, :, :], scores_BHQK, masks.large_negative(f32))
  probs_BHQK = jax.nn.softmax(scores_BHQK, axis=-1)
  if not deterministic and dropout_rate > 0.0:
    probs_BHQK = dropout_lib.dropout(probs_BHQK, dropout_rate, dropout_rng)
  return jnp.einsum("bhqk,bkhd->bqhd", probs_BHQK.astype(value_BKHD.dtype), value_BKHD)
