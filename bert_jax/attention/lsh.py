"""Reformer-style shared-QK attention with locality-sensitive hashing (Kitaev et al. 2020).

Queries and keys share one projection; keys are the length-normalised queries. Each hash round
sends every position to an angular-LSH bucket; positions are sorted by (round, bucket, position),
cut into chunks of ``chunk_len``, and every chunk attends to itself and its neighbouring chunks
(cyclically, over all rounds laid end to end). Each round yields an output and its log-sum-exp;
rounds are combined with weights ``exp(lse_r - logsumexp_r(lse_r))``, which is exact softmax
attention over all the (query, key) appearances of every round.

With ``dedup_correction`` a key that shows up ``m`` times in a query's windows (over all rounds)
gets ``log m`` subtracted from its logit each time, so the combined output is softmax attention
over the *set* of keys the query saw, each counted once.

Memory is linear in length: the largest tensors are the chunked logits
[B, H, n_hashes * L / chunk_len, chunk_len, window * chunk_len] (n_hashes times that, in int32,
while counting duplicates) and the blocks of rotated vectors during hashing. Time is linear
except for the hashing matmul, quadratic with the default n_buckets but with a small constant
(see ``lsh_hashing``, which also offers linear-time factorised buckets).

Hashing and argument checks live in ``lsh_hashing`` and the references in ``lsh_reference``; all
public names are importable from here. ``lsh_attention_reference`` redoes the sorting, chunking
and duplicate counting independently and densely (L x L per round) for equivalence tests;
``dense_shared_qk_attention`` is full attention with the same masking rules.
"""

import math

import jax
import jax.numpy as jnp

from bert_jax.attention import masks
from bert_jax.attention.lsh_hashing import hash_buckets
from bert_jax.attention.lsh_hashing import length_normalize
from bert_jax.attention.lsh_hashing import validate
# Re-exported so callers import every public name from this module.
from bert_jax.attention.lsh_reference import SELF_MASK_VALUE
from bert_jax.attention.lsh_reference import dense_shared_qk_attention
from bert_jax.attention.lsh_reference import lsh_attention_reference

__all__ = ["SELF_MASK_VALUE", "dense_shared_qk_attention", "hash_buckets", "lsh_attention",
           "lsh_attention_reference"]


@jax.custom_vjp
def _permute(x_BHS, perm_BHS, inverse_BHS):
  """x[..., perm[s], ...] along axis 2; the backward pass gathers with the inverse permutation.

  A plain gather would differentiate into a scatter-add; for a permutation the cotangent is just
  the inverse gather, which is cheaper on every backend.
  """
  index_BHS = perm_BHS.reshape(perm_BHS.shape + (1,) * (x_BHS.ndim - 3))
  return jnp.take_along_axis(x_BHS, index_BHS, axis=2)


def _permute_fwd(x_BHS, perm_BHS, inverse_BHS):
  return _permute(x_BHS, perm_BHS, inverse_BHS), (perm_BHS, inverse_BHS)


def _permute_bwd(residuals, grad_BHS):
  perm_BHS, inverse_BHS = residuals
  return _permute(grad_BHS, inverse_BHS, perm_BHS), None, None


_permute.defvjp(_permute_fwd, _permute_bwd)


@jax.custom_vjp
def _softmax_and_lse(logits_XK):
  """Softmax over the last axis and its log-sum-exp.

  Normalised by the explicit sum rather than exp(logits - lse): near the self-mask value
  (|logit| ~ 1e5) float32 rounds lse by up to 4e-3, which would leak into every probability.
  """
  max_X = jnp.max(logits_XK, axis=-1)
  unnormalized_XK = jnp.exp(logits_XK - max_X[..., None])
  sum_X = jnp.sum(unnormalized_XK, axis=-1)
  return unnormalized_XK / sum_X[..., None], max_X + jnp.log(sum_X)


def _softmax_and_lse_fwd(logits_XK):
  probs_XK, lse_X = _softmax_and_lse(logits_XK)
  return (probs_XK, lse_X), probs_XK


def _softmax_and_lse_bwd(probs_XK, grads):
  # d lse / d logits = probs, so both cotangents share one pass over the [.., K] block; autodiff
  # of the forward instead re-derives it through the division and the max (several more passes).
  grad_probs_XK, grad_lse_X = grads
  inner_X = jnp.sum(grad_probs_XK * probs_XK, axis=-1)
  return (probs_XK * (grad_probs_XK + (grad_lse_X - inner_X)[..., None]),)


_softmax_and_lse.defvjp(_softmax_and_lse_fwd, _softmax_and_lse_bwd)


def _inverse_permutation(perm_BHS):
  """inverse[perm[s]] = s for every batch and head (a scatter, cheaper than a second sort)."""
  iota_S = jnp.arange(perm_BHS.shape[-1], dtype=perm_BHS.dtype)
  invert_S = lambda perm_S: jnp.zeros_like(perm_S).at[perm_S].set(iota_S)
  return jax.vmap(jax.vmap(invert_S))(perm_BHS)


def _look_adjacent(x_BHCQ, n_chunks_before, n_chunks_after):
  """[B, H, C, Q, ...] -> [B, H, C, W*Q, ...]: chunk c beside chunks c-before .. c+after, cyclic."""
  return jnp.concatenate(
      [jnp.roll(x_BHCQ, -offset, axis=2) for offset in range(-n_chunks_before, n_chunks_after + 1)],
      axis=3)


def _duplicate_counts(query_locs_BHCQN, key_locs_BHCKN, same_bucket_BHCQKN, *, n_chunks,
                      n_chunks_before, n_chunks_after, round_shifts):
  """How many times each key of a window appears, unmasked, in the query's windows of all rounds.

  Args:
    query_locs_BHCQN: for each query slot, the chunk its position occupies in each round.
    key_locs_BHCKN: the same for each key slot of the window.
    same_bucket_BHCQKN: None, or (when attention across buckets is masked) whether query and key
      share a bucket in each round; appearances in other buckets are masked, so not counted.
    n_chunks: chunks over all rounds; windows wrap around modulo this.
    n_chunks_before: chunks before the query's chunk in its window.
    n_chunks_after: chunks after it.
    round_shifts: round offsets r' - r to compare; other rounds provably never share a window.

  Returns:
    int32 [B, H, C, Q, K], at least 1 wherever the (query, key) entry is unmasked.
  """
  window = n_chunks_before + 1 + n_chunks_after
  query_locs_BHCQ1N = query_locs_BHCQN[:, :, :, :, None, :]
  counts_BHCQK = 0
  for shift in round_shifts:
    key_locs_BHC1KN = jnp.roll(key_locs_BHCKN, -shift, axis=-1)[:, :, :, None, :, :]
    # Position of the key's chunk counted from the first chunk of the query's window.
    rel_BHCQKN = jnp.mod(key_locs_BHC1KN - query_locs_BHCQ1N + n_chunks_before, n_chunks)
    # Window offsets t in [0, window) with t == rel (mod n_chunks): one when rel < window, and
    # more when a window longer than the whole sorted sequence wraps onto itself.
    hits_BHCQKN = (window - 1 - rel_BHCQKN) // n_chunks + 1
    if same_bucket_BHCQKN is not None:
      hits_BHCQKN = hits_BHCQKN * same_bucket_BHCQKN
    counts_BHCQK = counts_BHCQK + jnp.sum(hits_BHCQKN, axis=-1)
  return counts_BHCQK


def _round_shifts(n_hashes, chunks_per_round, n_chunks_before, n_chunks_after,
                  mask_across_buckets):
  """Round offsets whose chunks can fall in one window (see _duplicate_counts)."""
  if mask_across_buckets:
    # Buckets of different rounds never match, so only a key's own-round slot is unmasked.
    return (0,)
  if max(n_chunks_before, n_chunks_after) <= chunks_per_round:
    # Chunks of rounds two or more apart are more than chunks_per_round chunks apart.
    return tuple(sorted({0, 1 % n_hashes, (n_hashes - 1) % n_hashes}))
  return tuple(range(n_hashes))


def lsh_attention(qk_BLHD, value_BLHD, segment_ids_BL, *, rng, n_hashes, chunk_len,
                  n_buckets=None, n_chunks_before=1, n_chunks_after=0, causal=False,
                  mask_across_buckets=False, dedup_correction=True,
                  self_mask_value=SELF_MASK_VALUE):
  """Shared-QK LSH attention with memory linear in sequence length.

  Args:
    qk_BLHD: shared queries/keys [B, L, H, D]; keys are their length-normalised copies and
      logits are scaled by 1/sqrt(D).
    value_BLHD: values [B, L, H, D].
    segment_ids_BL: int [B, L]; 0 = padding, equal positive ids may attend to each other.
    rng: PRNG key for the random rotations (fixes the hashes).
    n_hashes: hash rounds (>= 1); more rounds approach full attention.
    chunk_len: chunk length; L must be a multiple of it.
    n_buckets: buckets per round (even); default 2 * L // chunk_len. A tuple of even factors
      selects factorised hashing (see ``lsh_hashing``): linear-time, but different buckets.
    n_chunks_before: earlier chunks each chunk attends to (cyclic over the sorted sequence).
    n_chunks_after: later chunks each chunk attends to.
    causal: forbid keys at later original positions than the query.
    mask_across_buckets: forbid keys from a different bucket than the query's.
    dedup_correction: count each distinct key once over all rounds (subtract log multiplicity).
    self_mask_value: added to the logit of a query's own position (negative, finite).

  Returns:
    [B, L, H, D] in the dtype of ``qk_BLHD``; softmax statistics are computed in float32. Rows
    of padding queries (which see no key) are finite but meaningless.
  """
  n_buckets = validate(qk_BLHD, value_BLHD, segment_ids_BL, n_hashes, chunk_len, n_buckets,
                        n_chunks_before, n_chunks_after)
  batch, length, n_heads, head_dim = qk_BLHD.shape
  n_slots = n_hashes * length
  n_chunks = n_slots // chunk_len
  bh_shape = (batch, n_heads)

  # Sort every round's positions by (round, bucket, position): buckets carry the round offset and
  # a stable sort keeps position order within a bucket.
  buckets_BHS = hash_buckets(qk_BLHD, rng, n_hashes=n_hashes, n_buckets=n_buckets).reshape(
      bh_shape + (n_slots,))
  iota_BHS = jnp.broadcast_to(jnp.arange(n_slots, dtype=jnp.int32), buckets_BHS.shape)
  sorted_buckets_BHS, sticker_BHS = jax.lax.sort(
      (buckets_BHS, iota_BHS), dimension=2, is_stable=True, num_keys=1)
  undo_sort_BHS = _inverse_permutation(sticker_BHS)
  position_BHS = sticker_BHS % length

  def sort_and_chunk(x_BLHD):
    x_BHSD = jnp.tile(jnp.transpose(x_BLHD, (0, 2, 1, 3)), (1, 1, n_hashes, 1))
    x_BHSD = _permute(x_BHSD, sticker_BHS, undo_sort_BHS)
    return x_BHSD.reshape(bh_shape + (n_chunks, chunk_len, head_dim))

  def chunk(x_BHS):
    return x_BHS.reshape(bh_shape + (n_chunks, chunk_len) + x_BHS.shape[3:])

  def adjacent(x_BHCQ):
    return _look_adjacent(x_BHCQ, n_chunks_before, n_chunks_after)

  query_BHCQD = sort_and_chunk(qk_BLHD)
  key_BHCKD = adjacent(length_normalize(query_BHCQD))
  value_BHCKD = adjacent(sort_and_chunk(value_BLHD))
  # Contracting the query over its second-minor axis makes XLA:CPU emit its own batched GEMM,
  # measured ~1.5x faster here than the library kernel it picks for the row-major form.
  query_BHCDQ = jnp.swapaxes(query_BHCQD, 3, 4)
  logits_BHCQK = jnp.einsum("bhcdq,bhckd->bhcqk", query_BHCDQ, key_BHCKD,
                            preferred_element_type=jnp.float32) * (1.0 / math.sqrt(head_dim))

  pos_q_BHCQ = chunk(position_BHS)
  pos_k_BHCK = adjacent(pos_q_BHCQ)
  is_self_BHCQK = pos_q_BHCQ[..., :, None] == pos_k_BHCK[..., None, :]
  logits_BHCQK = jnp.where(is_self_BHCQK, logits_BHCQK + self_mask_value, logits_BHCQK)

  segment_ids_BHL = jnp.broadcast_to(segment_ids_BL[:, None, :], bh_shape + (length,))
  seg_q_BHCQ = chunk(jnp.take_along_axis(segment_ids_BHL, position_BHS, axis=2))
  seg_k_BHCK = adjacent(seg_q_BHCQ)
  allowed_BHCQK = ((seg_q_BHCQ[..., :, None] == seg_k_BHCK[..., None, :])
                   & (seg_k_BHCK != 0)[..., None, :])
  if causal:
    allowed_BHCQK &= pos_k_BHCK[..., None, :] <= pos_q_BHCQ[..., :, None]
  bucket_q_BHCQ = chunk(sorted_buckets_BHS)
  if mask_across_buckets:
    allowed_BHCQK &= bucket_q_BHCQ[..., :, None] == adjacent(bucket_q_BHCQ)[..., None, :]
  logits_BHCQK = jnp.where(allowed_BHCQK, logits_BHCQK, masks.large_negative(jnp.float32))

  if dedup_correction:
    # Chunk occupied by each original position in each round, then looked up per slot.
    locs_BHLN = jnp.moveaxis((undo_sort_BHS // chunk_len).reshape(
        bh_shape + (n_hashes, length)), 2, 3)
    query_locs_BHCQN = chunk(jnp.take_along_axis(locs_BHLN, position_BHS[..., None], axis=2))
    same_bucket_BHCQKN = None
    if mask_across_buckets:
      buckets_BHLN = jnp.moveaxis(buckets_BHS.reshape(bh_shape + (n_hashes, length)), 2, 3)
      bucket_q_BHCQN = chunk(jnp.take_along_axis(buckets_BHLN, position_BHS[..., None], axis=2))
      same_bucket_BHCQKN = (bucket_q_BHCQN[:, :, :, :, None, :]
                            == adjacent(bucket_q_BHCQN)[:, :, :, None, :, :])
    counts_BHCQK = _duplicate_counts(
        query_locs_BHCQN, adjacent(query_locs_BHCQN), same_bucket_BHCQKN, n_chunks=n_chunks,
        n_chunks_before=n_chunks_before, n_chunks_after=n_chunks_after,
        round_shifts=_round_shifts(n_hashes, length // chunk_len, n_chunks_before,
                                   n_chunks_after, mask_across_buckets))
    # Masked entries may count 0; the floor of 1 keeps them finite (they stay masked anyway).
    logits_BHCQK -= jnp.log(jnp.maximum(counts_BHCQK, 1).astype(jnp.float32))

  probs_BHCQK, lse_BHCQ = _softmax_and_lse(logits_BHCQK)
  out_BHCQD = jnp.einsum("bhcqk,bhckd->bhcqd", probs_BHCQK.astype(value_BLHD.dtype), value_BHCKD,
                         preferred_element_type=jnp.float32)

  # Back to (round, position) order, then weight each round by its share of the total mass.
  out_BHSD = _permute(out_BHCQD.reshape(bh_shape + (n_slots, head_dim)), undo_sort_BHS,
                      sticker_BHS)
  lse_BHS = _permute(lse_BHCQ.reshape(bh_shape + (n_slots,)), undo_sort_BHS, sticker_BHS)
  out_BHNLD = out_BHSD.reshape(bh_shape + (n_hashes, length, head_dim))
  lse_BHNL = lse_BHS.reshape(bh_shape + (n_hashes, length))
  weights_BHNL = jax.nn.softmax(lse_BHNL, axis=2)
  out_BHLD = jnp.sum(weights_BHNL[..., None] * out_BHNLD, axis=2)
  return jnp.transpose(out_BHLD, (0, 2, 1, 3)).astype(qk_BLHD.dtype)
