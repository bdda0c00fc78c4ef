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
while counting duplicates) and the blocks of rotated vectors during hashing.

``lsh_attention_reference`` redoes the sorting, chunking and duplicate counting independently and
densely (L x L per round) for equivalence tests; ``dense_shared_qk_attention`` is full attention
with the same masking rules.
"""

import math

import jax
import jax.numpy as jnp

from bert_jax.attention import masks
from bert_jax.errors import UserInputError

# Added to the logit of a query's own position: small next to the padding mask, so a token still
# attends to itself when no other key is visible, yet exp() of it underflows to 0 otherwise.
SELF_MASK_VALUE = -1e5

_NORM_EPSILON = 1e-6


def _validate(qk_BLHD, value_BLHD, segment_ids_BL, n_hashes, chunk_len, n_buckets,
              n_chunks_before, n_chunks_after):
  """Checks arguments; returns the number of buckets to use."""
  if qk_BLHD.ndim != 4 or qk_BLHD.shape != value_BLHD.shape:
    raise UserInputError(f"qk and value must both be [batch, length, heads, head_dim], got "
                     f"{qk_BLHD.shape} and {value_BLHD.shape}; pass one array per head layout.")
  batch, length = qk_BLHD.shape[:2]
  if segment_ids_BL.shape != (batch, length):
    raise UserInputError(f"segment_ids has shape {segment_ids_BL.shape}, expected {(batch, length)}; "
                     "pass one id per token (0 = padding).")
  if n_hashes < 1:
    raise UserInputError(f"n_hashes must be >= 1, got {n_hashes}; use at least one hash round.")
  if chunk_len < 1 or length % chunk_len:
    raise UserInputError(f"sequence length {length} is not a multiple of chunk_len {chunk_len}; "
                     "pad the sequence to a multiple of chunk_len.")
  if n_chunks_before < 0 or n_chunks_after < 0:
    raise UserInputError(f"n_chunks_before and n_chunks_after must be >= 0, got {n_chunks_before} "
                     f"and {n_chunks_after}; use 0 for no neighbour on that side.")
  if n_buckets is None:
    n_buckets = max(2, 2 * length // chunk_len)
  if n_buckets < 2 or n_buckets % 2:
    raise UserInputError(f"n_buckets must be even and >= 2, got {n_buckets}; use an even count such "
                     "as 2 * length // chunk_len.")
  return n_buckets


# Hashing rotates every position onto n_buckets / 2 directions, and n_buckets usually grows with
# L, so positions are hashed in blocks of at most this * L / n_buckets: the rotated values then
# stay near 128 * L per batch, head and round (the size of the logits for chunk_len 64 with one
# chunk before) instead of growing as L * L / chunk_len.
_HASH_BLOCK_VALUES_PER_POSITION = 128


def hash_buckets(qk_BLHD, rng, *, n_hashes, n_buckets):
  """Angular-LSH bucket of every position, for every head and hash round.

  Args:
    qk_BLHD: shared query/key vectors [B, L, H, D].
    rng: PRNG key; it alone fixes the random rotations, so equal keys give equal buckets.
    n_hashes: number of hash rounds N.
    n_buckets: buckets per round (even).

  Returns:
    int32 [B, H, N, L]; round r's buckets lie in [r * n_buckets, (r + 1) * n_buckets), so a
    sort by bucket also groups by round.
  """
  length, n_heads, head_dim = qk_BLHD.shape[1:]
  shape_HNDR = (n_heads, n_hashes, head_dim, n_buckets // 2)
  # Drawn flat and reshaped: XLA:CPU compiles a multi-dimensional threefry draw ~10x slower.
  rotations_HNDR = jax.random.normal(rng, (math.prod(shape_HNDR),), jnp.float32).reshape(shape_HNDR)

  def bucket_of_positions(x_XBHD):
    # Rotation index leading: XLA:CPU reduces across a major axis with vector instructions, but
    # an argmax over the minor axis runs ~2x slower than the rotation matmul itself.
    rotated_RXBHN = jnp.einsum("xbhd,hndr->rxbhn", x_XBHD, rotations_HNDR)
    return jnp.argmax(jnp.concatenate([rotated_RXBHN, -rotated_RXBHN], axis=0), axis=0)

  # Buckets come from an integer argmax, so they carry no gradient; stopping it here keeps the
  # hashing out of the backward pass, which reuses the forward buckets.
  x_LBHD = jnp.moveaxis(jax.lax.stop_gradient(qk_BLHD).astype(jnp.float32), 1, 0)
  max_block = max(1, _HASH_BLOCK_VALUES_PER_POSITION * length // n_buckets)
  n_blocks = next(n for n in range(-(-length // max_block), length + 1) if length % n == 0)
  x_KXBHD = x_LBHD.reshape((n_blocks, length // n_blocks) + x_LBHD.shape[1:])
  if n_blocks == 1:
    buckets_KXBHN = bucket_of_positions(x_KXBHD[0])[None]
  else:
    buckets_KXBHN = jax.lax.map(bucket_of_positions, x_KXBHD)
  buckets_LBHN = buckets_KXBHN.reshape((length,) + buckets_KXBHN.shape[2:])
  offsets_N = jnp.arange(n_hashes, dtype=jnp.int32) * n_buckets
  buckets_BHNL = jnp.transpose(buckets_LBHN.astype(jnp.int32), (1, 2, 3, 0))
  return buckets_BHNL + offsets_N[None, None, :, None]


def _length_normalize(x_XD):
  """Unit-length vectors along the last axis (computed in float32, returned in x's dtype)."""
  x32_XD = x_XD.astype(jnp.float32)
  inv_norm_X1 = jax.lax.rsqrt(jnp.sum(x32_XD * x32_XD, axis=-1, keepdims=True) + _NORM_EPSILON)
  return (x32_XD * inv_norm_X1).astype(x_XD.dtype)


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
    n_buckets: buckets per round (even); default 2 * L // chunk_len.
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
  n_buckets = _validate(qk_BLHD, value_BLHD, segment_ids_BL, n_hashes, chunk_len, n_buckets,
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
  key_BHCKD = adjacent(_length_normalize(query_BHCQD))
  value_BHCKD = adjacent(sort_and_chunk(value_BLHD))
  logits_BHCQK = jnp.einsum("bhcqd,bhckd->bhcqk", query_BHCQD, key_BHCKD,
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

  # Normalise by the explicit sum rather than exp(logits - lse): near the self-mask value
  # (|logit| ~ 1e5) float32 rounds lse by up to 4e-3, which would leak into every probability.
  max_BHCQ = jax.lax.stop_gradient(jnp.max(logits_BHCQK, axis=-1))
  unnormalized_BHCQK = jnp.exp(logits_BHCQK - max_BHCQ[..., None])
  sum_BHCQ = jnp.sum(unnormalized_BHCQK, axis=-1)
  probs_BHCQK = unnormalized_BHCQK / sum_BHCQ[..., None]
  lse_BHCQ = max_BHCQ + jnp.log(sum_BHCQ)
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


def _dense_logits(qk_BLHD, segment_ids_BL, causal, self_mask_value):
  """Full [B, H, L, L] shared-QK logits in float32 with the self, padding and causal rules."""
  length, head_dim = qk_BLHD.shape[1], qk_BLHD.shape[3]
  key_BLHD = _length_normalize(qk_BLHD)
  logits_BHLL = jnp.einsum("bqhd,bkhd->bhqk", qk_BLHD, key_BLHD,
                           preferred_element_type=jnp.float32) * (1.0 / math.sqrt(head_dim))
  eye_11LL = jnp.eye(length, dtype=bool)[None, None]
  logits_BHLL = jnp.where(eye_11LL, logits_BHLL + self_mask_value, logits_BHLL)
  allowed_B1LL = masks.segment_mask(segment_ids_BL, segment_ids_BL)
  if causal:
    allowed_B1LL &= jnp.tril(jnp.ones((length, length), dtype=bool))[None, None]
  return jnp.where(allowed_B1LL, logits_BHLL, masks.large_negative(jnp.float32))


def dense_shared_qk_attention(qk_BLHD, value_BLHD, segment_ids_BL, *, causal=False,
                              self_mask_value=SELF_MASK_VALUE):
  """Full (L x L) shared-QK attention with the same masking rules as ``lsh_attention``."""
  logits_BHLL = _dense_logits(qk_BLHD, segment_ids_BL, causal, self_mask_value)
  probs_BHLL = jax.nn.softmax(logits_BHLL, axis=-1)
  out_BLHD = jnp.einsum("bhqk,bkhd->bqhd", probs_BHLL, value_BLHD.astype(jnp.float32))
  return out_BLHD.astype(qk_BLHD.dtype)


def lsh_attention_reference(qk_BLHD, value_BLHD, segment_ids_BL, *, rng, n_hashes, chunk_len,
                            n_buckets=None, n_chunks_before=1, n_chunks_after=0, causal=False,
                            mask_across_buckets=False, dedup_correction=True,
                            self_mask_value=SELF_MASK_VALUE):
  """Slow, dense twin of ``lsh_attention`` (same arguments and hashing) for tests.

  No sort, gather or chunked tensor: each (round, position)'s place in the sorted order is its
  rank, counted by comparing against every other (round, position). From it the reference builds,
  per round, the L x L matrix of how many times each key appears in each query's window, and runs
  a dense softmax over all L keys weighted by that multiplicity.
  """
  n_buckets = _validate(qk_BLHD, value_BLHD, segment_ids_BL, n_hashes, chunk_len, n_buckets,
                        n_chunks_before, n_chunks_after)
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
      (b_other_BH11NL == b_self_BHNL11) & (p_other_1111NL < p_self_11NL11))
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
  round_logits_BHNLL = jnp.where(
      seen_BHNLL, logits_BHLL[:, :, None] + multiplicity_BHNLL, -jnp.inf)
  lse_BHNL = jax.nn.logsumexp(round_logits_BHNLL, axis=-1)
  probs_BHNLL = jax.nn.softmax(round_logits_BHNLL, axis=-1)
  out_BHNLD = jnp.einsum("bhnqk,bkhd->bhnqd", probs_BHNLL, value_BLHD.astype(jnp.float32))
  weights_BHNL = jax.nn.softmax(lse_BHNL, axis=2)
  out_BHLD = jnp.sum(weights_BHNL[..., None] * out_BHNLD, axis=2)
  return jnp.transpose(out_BHLD, (0, 2, 1, 3)).astype(qk_BLHD.dtype)
