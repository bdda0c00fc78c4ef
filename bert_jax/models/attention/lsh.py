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

Memory and time are linear in length. The attention itself (``lsh_chunks``) loops over blocks
of chunks with a hand-written backward pass, so no tensor of all the windows' logits is ever
built; the largest tensors are the sorted copies of queries, values and their gradients,
[B, H, n_hashes * L, D]. Hashing is linear too: the default bucket count 2 * L / chunk_len is
hashed factorised once it exceeds 256 (see ``lsh_hashing``), where a single rotation's matmul
would grow as L^2.

Hashing and argument checks live in ``lsh_hashing`` and the references in ``lsh_reference``; all
public names are importable from here. ``lsh_attention_reference`` redoes the sorting, chunking
and duplicate counting independently and densely (L x L per round) for equivalence tests;
``dense_shared_qk_attention`` is full attention with the same masking rules.
"""

import functools
import math

import jax
import jax.numpy as jnp

from bert_jax.models.attention import lsh_chunks
from bert_jax.models.attention.lsh_hashing import hash_buckets, validate

# Re-exported so callers import every public name from this module.
from bert_jax.models.attention.lsh_reference import (
  SELF_MASK_VALUE,
  dense_shared_qk_attention,
  lsh_attention_reference,
)

__all__ = [
  "SELF_MASK_VALUE",
  "dense_shared_qk_attention",
  "hash_buckets",
  "lsh_attention",
  "lsh_attention_reference",
]


def _take(x_BHS, index_BHS):
  """x[..., index[s], ...] along axis 2 (indices are in bounds by construction)."""
  index_BHS = index_BHS.reshape(index_BHS.shape + (1,) * (x_BHS.ndim - 3))
  return jnp.take_along_axis(x_BHS, index_BHS, axis=2, mode="promise_in_bounds")


@jax.custom_vjp
def _permute(x_BHS, perm_BHS, inverse_BHS):
  """x[..., perm[s], ...] along axis 2; the backward pass gathers with the inverse permutation.

  A plain gather would differentiate into a scatter-add; for a permutation the cotangent is just
  the inverse gather, which is cheaper on every backend.
  """
  return _take(x_BHS, perm_BHS)


def _permute_fwd(x_BHS, perm_BHS, inverse_BHS):
  return _permute(x_BHS, perm_BHS, inverse_BHS), (perm_BHS, inverse_BHS)


def _permute_bwd(residuals, grad_BHS):
  perm_BHS, inverse_BHS = residuals
  return _permute(grad_BHS, inverse_BHS, perm_BHS), None, None


_permute.defvjp(_permute_fwd, _permute_bwd)


def _rounds(x_BHS, n_hashes):
  """Axis 2 cut into n_hashes equal slices, one per hash round."""
  length = x_BHS.shape[2] // n_hashes
  return [x_BHS[:, :, r * length : (r + 1) * length] for r in range(n_hashes)]


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _gather_rounds(x_BHLD, position_BHS, undo_sort_BHS, n_hashes):
  """x at every sorted slot's position: [B, H, L, D] -> [B, H, n_hashes * L, D].

  Each position fills one slot per round, so its cotangent is the sum of its slots' cotangents:
  n_hashes gathers and adds instead of autodiff's scatter-add.
  """
  return _take(x_BHLD, position_BHS)


def _gather_rounds_fwd(x_BHLD, position_BHS, undo_sort_BHS, n_hashes):
  return _take(x_BHLD, position_BHS), undo_sort_BHS


def _gather_rounds_bwd(n_hashes, undo_sort_BHS, grad_BHSD):
  grads = [_take(grad_BHSD, undo_BHL) for undo_BHL in _rounds(undo_sort_BHS, n_hashes)]
  return sum(grads[1:], grads[0]), None, None


_gather_rounds.defvjp(_gather_rounds_fwd, _gather_rounds_bwd)


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _combine_rounds(out_BHSD, weights_BHNL, undo_sort_BHS, sticker_BHS, n_hashes):
  """sum_r weights[r, l] * out[slot of (r, l)]: undoes the sort and combines the rounds at once.

  Args:
    out_BHSD: per-slot outputs in sorted order.
    weights_BHNL: each round's weight for each position.
    undo_sort_BHS: sorted slot of each (round, position).
    sticker_BHS: (round, position) of each sorted slot.
    n_hashes: rounds N.

  Returns:
    [B, H, L, D]. The cotangent of out is a gather of the output's cotangent by position, again
    with no scatter.
  """
  weights = [
    w_BHL[..., None] for w_BHL in _rounds(weights_BHNL.reshape(undo_sort_BHS.shape), n_hashes)
  ]
  terms = [
    w_BHL1 * _take(out_BHSD, undo_BHL)
    for w_BHL1, undo_BHL in zip(weights, _rounds(undo_sort_BHS, n_hashes))
  ]
  return sum(terms[1:], terms[0])


def _combine_rounds_fwd(out_BHSD, weights_BHNL, undo_sort_BHS, sticker_BHS, n_hashes):
  combined_BHLD = _combine_rounds(out_BHSD, weights_BHNL, undo_sort_BHS, sticker_BHS, n_hashes)
  return combined_BHLD, (out_BHSD, weights_BHNL, undo_sort_BHS, sticker_BHS)


def _combine_rounds_bwd(n_hashes, residuals, grad_BHLD):
  out_BHSD, weights_BHNL, undo_sort_BHS, sticker_BHS = residuals
  length = grad_BHLD.shape[2]
  weights_BHS = _take(weights_BHNL.reshape(sticker_BHS.shape), sticker_BHS)
  grad_out_BHSD = weights_BHS[..., None] * _take(grad_BHLD, sticker_BHS % length)
  grad_weights = [
    jnp.einsum("bhld,bhld->bhl", grad_BHLD, _take(out_BHSD, undo_BHL))
    for undo_BHL in _rounds(undo_sort_BHS, n_hashes)
  ]
  return grad_out_BHSD, jnp.stack(grad_weights, axis=2), None, None


_combine_rounds.defvjp(_combine_rounds_fwd, _combine_rounds_bwd)


def _inverse_permutation(perm_BHS):
  """inverse[perm[s]] = s for every batch and head (a scatter, cheaper than a second sort)."""
  iota_S = jnp.arange(perm_BHS.shape[-1], dtype=perm_BHS.dtype)

  def invert_S(perm_S):
    return jnp.zeros_like(perm_S).at[perm_S].set(iota_S)

  return jax.vmap(jax.vmap(invert_S))(perm_BHS)


def _sort_slots(buckets_BHS, length, buckets_per_round):
  """Sorts the slots (round r, position l) = r * L + l by (bucket, position).

  Returns:
    (sorted buckets, sticker): sticker[s] is the slot at sorted place s.
  """
  n_slots = buckets_BHS.shape[-1]
  if n_slots // length * buckets_per_round * length < 2**31:
    # One int32 key bucket * L + position: a plain sort, ~5x faster on CPU than a stable sort
    # of (bucket, slot) pairs. Round offsets in the buckets keep rounds apart.
    position_11S = (jnp.arange(n_slots, dtype=jnp.int32) % length)[None, None]
    sorted_BHS = jax.lax.sort(buckets_BHS * length + position_11S, dimension=2)
    sorted_buckets_BHS = sorted_BHS // length
    return (
      sorted_buckets_BHS,
      sorted_buckets_BHS // buckets_per_round * length + sorted_BHS % length,
    )
  iota_BHS = jnp.broadcast_to(jnp.arange(n_slots, dtype=jnp.int32), buckets_BHS.shape)
  return jax.lax.sort((buckets_BHS, iota_BHS), dimension=2, is_stable=True, num_keys=1)


def _round_shifts(n_hashes, chunks_per_round, n_chunks_before, n_chunks_after, mask_across_buckets):
  """Round differences (key round - query round) whose slots can share a window, modulo N."""
  if mask_across_buckets:
    # Buckets of different rounds never match, so only a key's own-round slot is unmasked.
    return (0,)
  # A window reaches ceil(before / chunks_per_round) rounds back and ceil(after / ...) ahead.
  back = -(-n_chunks_before // chunks_per_round)
  ahead = -(-n_chunks_after // chunks_per_round)
  return tuple(sorted({shift % n_hashes for shift in range(-back, ahead + 1)}))


def lsh_attention(
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
  """Shared-QK LSH attention with memory linear in sequence length.

  Args:
    qk_BLHD: shared queries/keys [B, L, H, D]; keys are their length-normalised copies and
      logits are scaled by 1/sqrt(D).
    value_BLHD: values [B, L, H, D].
    segment_ids_BL: int [B, L]; 0 = padding, equal positive ids may attend to each other.
    rng: PRNG key for the random rotations (fixes the hashes).
    n_hashes: hash rounds (>= 1); more rounds approach full attention.
    chunk_len: chunk length; L must be a multiple of it.
    n_buckets: buckets per round: an even int (one random rotation), a tuple of even factors
      (factorised hashing, their product many buckets), or None for 2 * L // chunk_len buckets,
      factorised above 256 (rule: ``lsh_hashing.bucket_factors``).
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
  batch, length, n_heads, _ = qk_BLHD.shape
  n_slots = n_hashes * length
  bh_shape = (batch, n_heads)

  # Sort every round's positions by (round, bucket, position): buckets carry the round offset and
  # a stable sort keeps position order within a bucket.
  buckets_BHNL = hash_buckets(qk_BLHD, rng, n_hashes=n_hashes, n_buckets=n_buckets)
  buckets_BHS = buckets_BHNL.reshape(bh_shape + (n_slots,))
  sorted_buckets_BHS, sticker_BHS = _sort_slots(buckets_BHS, length, math.prod(n_buckets))
  undo_sort_BHS = _inverse_permutation(sticker_BHS)
  position_BHS = sticker_BHS % length

  def sort(x_BLHD):
    x_BHLD = jnp.transpose(x_BLHD, (0, 2, 1, 3))
    return _gather_rounds(x_BHLD, position_BHS, undo_sort_BHS, n_hashes)

  query_BHSD = sort(qk_BLHD)
  value_BHSD = sort(value_BLHD)
  segment_ids_BHL = jnp.broadcast_to(segment_ids_BL[:, None, :], bh_shape + (length,))
  slots_BHS = {"pos": position_BHS, "seg": _take(segment_ids_BHL.astype(jnp.int32), position_BHS)}
  if mask_across_buckets:
    slots_BHS["bucket"] = sorted_buckets_BHS
  round_shifts = ()
  if dedup_correction:
    round_shifts = _round_shifts(
      n_hashes, length // chunk_len, n_chunks_before, n_chunks_after, mask_across_buckets
    )
    # The chunk, and the bucket, of each slot's position in each round.
    for r, undo_BHL in enumerate(_rounds(undo_sort_BHS, n_hashes)):
      slots_BHS[f"loc{r}"] = _take(undo_BHL // chunk_len, position_BHS)
    if mask_across_buckets:
      for r, buckets_BHL in enumerate(_rounds(buckets_BHS, n_hashes)):
        slots_BHS[f"round_bucket{r}"] = _take(buckets_BHL, position_BHS)
  spec = lsh_chunks.ChunkSpec(
    chunk_len=chunk_len,
    n_chunks_before=n_chunks_before,
    n_chunks_after=n_chunks_after,
    causal=causal,
    mask_across_buckets=mask_across_buckets,
    self_mask_value=self_mask_value,
    round_shifts=round_shifts,
  )
  out_BHSD, lse_BHS = lsh_chunks.attend_chunks(query_BHSD, value_BHSD, slots_BHS, spec)

  # Each round's weight is its share of the total softmax mass of the position.
  lse_BHNL = _permute(lse_BHS, undo_sort_BHS, sticker_BHS).reshape(bh_shape + (n_hashes, length))
  weights_BHNL = jax.nn.softmax(lse_BHNL, axis=2)
  out_BHLD = _combine_rounds(out_BHSD, weights_BHNL, undo_sort_BHS, sticker_BHS, n_hashes)
  return jnp.transpose(out_BHLD, (0, 2, 1, 3)).astype(qk_BLHD.dtype)
