"""Slow references for ``bert_jax.models.attention.lsh``: dense attention and a loop-free LSH twin.

Both build L x L tensors, so they are for tests at small lengths only.
"""

import math

import jax
import jax.numpy as jnp

from bert_jax.models.attention import masks
from bert_jax.models.attention.lsh_hashing import hash_buckets, length_normalize, validate

# Added to the logit of a query's own position: small next to the padding mask, so a token still
# attends to itself when no other key is visible, yet exp() of it underflows to 0 otherwise.
SELF_MASK_VALUE = -1e5


def _dense_logits(qk_BLHD, segment_ids_BL, causal, self_mask_value):
  """Full [B, H, L, L] shared-QK logits in float32 with the self, padding and causal rules."""
  length, head_dim = qk_BLHD.shape[1], qk_BLHD.shape[3]
  key_BLHD = length_normalize(qk_BLHD)
  logits_BHLL = jnp.einsum(
    "bqhd,bkhd->bhqk", qk_BLHD, key_BLHD, preferred_element_type=jnp.float32
  ) * (1.0 / math.sqrt(head_dim))
  eye_11LL = jnp.eye(length, dtype=bool)[None, None]
  logits_BHLL = jnp.where(eye_11LL, logits_BHLL + self_mask_value, logits_BHLL)
  allowed_B1LL = masks.segment_mask(segment_ids_BL, segment_ids_BL)
  if causal:
    allowed_B1LL &= jnp.tril(jnp.ones((length, length), dtype=bool))[None, None]
  return jnp.where(allowed_B1LL, logits_BHLL, masks.large_negative(jnp.float32))


def dense_shared_qk_attention(
  qk_BLHD, value_BLHD, segment_ids_BL, *, causal=False, self_mask_value=SELF_MASK_VALUE
):
  """Full (L x L) shared-QK attention with the same masking rules as ``lsh_attention``."""
  logits_BHLL = _dense_logits(qk_BLHD, segment_ids_BL, causal, self_mask_value)
  probs_BHLL = jax.nn.softmax(logits_BHLL, axis=-1)
  out_BLHD = jnp.einsum("bhqk,bkhd->bqhd", probs_BHLL, value_BLHD.astype(jnp.float32))
  return out_BLHD.astype(qk_BLHD.dtype)


def lsh_attention_reference(
  qk_BLHD,
  value_BLHD,
  segment_ids_BL,
  *,
  rng,
  n_hashes,
  chunk_len,
  n_buckets=None,
  n_chunks_before=1,
  n_chunks_after=0,
  causal=False,
  mask_across_buckets=False,
  dedup_correction=True,
  self_mask_value=SELF_MASK_VALUE,
):
  """Slow, dense twin of ``lsh_attention`` (same arguments and hashing) for tests.

  No sort, gather or chunked tensor: each (round, position)'s place in the sorted order is its
  rank, counted by comparing against every other (round, position). From it the reference builds,
  per round, the L x L matrix of how many times each key appears in each query's window, and runs
  a dense softmax over all L keys weighted by that multiplicity.
  """
  n_buckets = validate(
    qk_BLHD,
    value_BLHD,
    segment_ids_BL,
    n_hashes,
    chunk_len,
    n_buckets,
    n_chunks_before,
    n_chunks_after,
  )
  length = qk_BLHD.shape[1]
  n_chunks = n_hashes * length // chunk_len
  buckets_BHNL = hash_buckets(qk_BLHD, rng, n_hashes=n_hashes, n_buckets=n_buckets)

  # rank(r, x) = #{(r', y): (bucket(r', y), y) < (bucket(r, x), x)}; round offsets in the buckets
  # make this the (round, bucket, position) order.
  positions_11NL = jnp.broadcast_to(jnp.arange(length), (1, 1, n_hashes, length))
  b_self_BHNL11 = buckets_BHNL[..., None, None]
  b_other_BH11NL = buckets_BHNL[:, :, None, None, :, :]
  p_self_11NL11 = positions_11NL[..., None, None]
  p_other_1111NL = positions_11NL[:, :, None, None, :, :]
  earlier_BHNLNL = (b_other_BH11NL < b_self_BHNL11) | (
    (b_other_BH11NL == b_self_BHNL11) & (p_other_1111NL < p_self_11NL11)
  )
  chunk_BHNL = jnp.sum(earlier_BHNLNL, axis=(-2, -1)) // chunk_len

  # appearances[b, h, r, q, k]: times key k sits in query q's round-r window, counting (when
  # attention across buckets is masked) only slots in q's own bucket: the others are masked, and
  # every query has its own slot unmasked, so they never carry weight.
  q_chunk_BHNL11 = chunk_BHNL[..., None, None]
  k_chunk_BH11NL = chunk_BHNL[:, :, None, None, :, :]
  in_window_BHNLNL = jnp.zeros(earlier_BHNLNL.shape, jnp.int32)
  for offset in range(-n_chunks_before, n_chunks_after + 1):
    in_window_BHNLNL += k_chunk_BH11NL == jnp.mod(q_chunk_BHNL11 + offset, n_chunks)
  if mask_across_buckets:
    in_window_BHNLNL *= b_other_BH11NL == b_self_BHNL11
  appearances_BHNLL = jnp.sum(in_window_BHNLNL, axis=-2)

  logits_BHLL = _dense_logits(qk_BLHD, segment_ids_BL, causal, self_mask_value)
  if dedup_correction:
    counts_BHLL = jnp.sum(appearances_BHNLL, axis=2)
    logits_BHLL -= jnp.log(jnp.maximum(counts_BHLL, 1).astype(jnp.float32))

  # A key seen m times in a round's windows enters that round's softmax m times: + log m. Keys
  # outside every window are left out of the sum (-inf), unlike masked keys inside a window.
  seen_BHNLL = appearances_BHNLL > 0
  multiplicity_BHNLL = jnp.log(jnp.maximum(appearances_BHNLL, 1).astype(jnp.float32))
  round_logits_BHNLL = jnp.where(seen_BHNLL, logits_BHLL[:, :, None] + multiplicity_BHNLL, -jnp.inf)
  lse_BHNL = jax.nn.logsumexp(round_logits_BHNLL, axis=-1)
  probs_BHNLL = jax.nn.softmax(round_logits_BHNLL, axis=-1)
  out_BHNLD = jnp.einsum("bhnqk,bkhd->bhnqd", probs_BHNLL, value_BLHD.astype(jnp.float32))
  weights_BHNL = jax.nn.softmax(lse_BHNL, axis=2)
  out_BHLD = jnp.sum(weights_BHNL[..., None] * out_BHNLD, axis=2)
  return jnp.transpose(out_BHLD, (0, 2, 1, 3)).astype(qk_BLHD.dtype)
