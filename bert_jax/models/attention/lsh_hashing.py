"""Argument checks, key normalisation and angular-LSH hashing for ``bert_jax.models.attention.lsh``.

Hashing (Kitaev et al. 2020): per head and round, a random rotation R ~ N(0, 1) of shape
[D, n_buckets / 2]; a vector's bucket is argmax([xR ; -xR]). This rotation matmul costs
L * D * n_buckets / 2 multiply-adds per head and round, so with n_buckets = 2 * L / chunk_len it
is the one step of LSH attention that is quadratic in L. It is computed as one GEMM per block of
positions followed by vectorised max/min reductions, which keeps its constant small, but at 64K
tokens (2,048 buckets) it would still cost as much as all the attention.

Factorised buckets (trax's option) remove the quadratic term: ``n_buckets=(a, b, ...)`` hashes
with one rotation per factor and combines the argmaxes as mixed-radix digits, for a * b * ...
buckets from (a + b + ...) / 2 rotations. The buckets are products of coarser angular cells, so
which positions share a bucket differs from single-rotation hashing with a * b buckets.

Bucket rule (`bucket_factors`): an int n_buckets is hashed with one rotation, as the paper does;
a tuple is hashed factorised; the default (None) takes the paper's count 2 * L / chunk_len and
hashes it with one rotation up to ``SINGLE_ROTATION_MAX_BUCKETS`` buckets and factorised into two
near-equal even factors above (512 -> 16 x 32, 2,048 -> 32 x 64), where the rotation would start
to cost a noticeable share of the layer. A count with no split into two even factors (2 * odd)
stays one rotation.
"""

import math

import jax
import jax.numpy as jnp

from bert_jax.errors import UserInputError
from bert_jax.models.attention import chunk_window

NORM_EPSILON = 1e-6  # Keeps 1 / |x| finite at x = 0.

# Default bucket counts above this are hashed factorised (see the module docstring).
SINGLE_ROTATION_MAX_BUCKETS = 256

# Positions are rotated in blocks of at most this many rotated values per head, so a block stays
# cache-sized while the reductions over it run (larger blocks were measured slower on CPU) ...
_HASH_BLOCK_VALUES = 1 << 18
# ... and at most this many per position, so short sequences keep hashing memory linear in L.
_HASH_BLOCK_VALUES_PER_POSITION = 16


def validate(
  qk_BLHD,
  value_BLHD,
  segment_ids_BL,
  n_hashes,
  chunk_len,
  n_buckets,
  n_chunks_before,
  n_chunks_after,
):
  """Checks arguments; returns the bucket factors to hash with (a tuple of even ints)."""
  if qk_BLHD.ndim != 4 or qk_BLHD.shape != value_BLHD.shape:
    raise UserInputError(
      f"qk and value must both be [batch, length, heads, head_dim], got "
      f"{qk_BLHD.shape} and {value_BLHD.shape}; pass one array per head "
      "layout."
    )
  batch, length = qk_BLHD.shape[:2]
  if segment_ids_BL.shape != (batch, length):
    raise UserInputError(
      f"segment_ids has shape {segment_ids_BL.shape}, expected "
      f"{(batch, length)}; pass one id per token (0 = padding)."
    )
  if n_hashes < 1:
    raise UserInputError(f"n_hashes must be >= 1, got {n_hashes}; use at least one hash round.")
  chunk_window.check_window(chunk_len, n_chunks_before, n_chunks_after)
  chunk_window.check_whole_chunks(length, chunk_len)
  return bucket_factors(n_buckets, length, chunk_len)


def bucket_factors(n_buckets, length, chunk_len):
  """The factors to hash with: (n,) for one rotation, (a, b, ...) for factorised buckets.

  Args:
    n_buckets: None (the default rule in the module docstring), an even int, or a tuple/list of
      even factors.
    length: sequence length L.
    chunk_len: chunk length.

  Returns:
    A tuple of even ints >= 2 whose product is the number of buckets per round.
  """
  if n_buckets is None:
    count = max(2, 2 * length // chunk_len)
    if count <= SINGLE_ROTATION_MAX_BUCKETS:
      return (count,)
    # The largest even a <= sqrt(count) with count / a even: two near-equal factors.
    splits = [
      a for a in range(2, math.isqrt(count) + 1, 2) if count % a == 0 and count // a % 2 == 0
    ]
    return (splits[-1], count // splits[-1]) if splits else (count,)
  factors = tuple(n_buckets) if isinstance(n_buckets, (tuple, list)) else (n_buckets,)
  if not factors or any(not isinstance(f, int) or f < 2 or f % 2 for f in factors):
    raise UserInputError(
      f"n_buckets must be even and >= 2 (or a tuple of such factors), got "
      f"{n_buckets}; use an even count such as 2 * length // chunk_len."
    )
  return factors


def length_normalize(x_XD):
  """Unit-length vectors along the last axis (computed in float32, returned in x's dtype)."""
  x32_XD = x_XD.astype(jnp.float32)
  inv_norm_X1 = jax.lax.rsqrt(jnp.sum(x32_XD * x32_XD, axis=-1, keepdims=True) + NORM_EPSILON)
  return (x32_XD * inv_norm_X1).astype(x_XD.dtype)


def _argmax_of_both_signs(rotated_XR):
  """argmax over the last axis of concat([x, -x]), first occurrence on ties, without the concat.

  Max and min reductions over the minor axis vectorise on CPU where a variadic argmax reduction
  does not; the index is then the first slot equal to the extreme. On a tie max(x) == -min(x)
  the first half wins, as in argmax over the concatenation.
  """
  n_rotations = rotated_XR.shape[-1]
  max_X = jnp.max(rotated_XR, axis=-1)
  min_X = jnp.min(rotated_XR, axis=-1)
  iota_R = jnp.arange(n_rotations, dtype=jnp.int32)
  first_max_X = jnp.min(jnp.where(rotated_XR == max_X[..., None], iota_R, n_rotations), axis=-1)
  first_min_X = jnp.min(jnp.where(rotated_XR == min_X[..., None], iota_R, n_rotations), axis=-1)
  return jnp.where(max_X >= -min_X, first_max_X, n_rotations + first_min_X)


def hash_buckets(qk_BLHD, rng, *, n_hashes, n_buckets):
  """Angular-LSH bucket of every position, for every head and hash round.

  Args:
    qk_BLHD: shared query/key vectors [B, L, H, D].
    rng: PRNG key; it alone fixes the random rotations, so equal keys give equal buckets.
    n_hashes: number of hash rounds N.
    n_buckets: buckets per round (even), or a tuple of even factors for factorised hashing:
      factor i's argmax is digit i (least significant first) of the bucket.

  Returns:
    int32 [B, H, N, L]; round r's buckets lie in [r * n, (r + 1) * n) for n the number of
    buckets, so a sort by bucket also groups by round.
  """
  factors = tuple(n_buckets) if isinstance(n_buckets, (tuple, list)) else (n_buckets,)
  batch, length, n_heads, head_dim = qk_BLHD.shape
  half_factors = tuple(f // 2 for f in factors)
  n_rotations = sum(half_factors)
  shape_HNDR = (n_heads, n_hashes, head_dim, n_rotations)
  # Drawn flat and reshaped: XLA:CPU compiles a multi-dimensional threefry draw ~10x slower.
  rotations_HNDR = jax.random.normal(rng, (math.prod(shape_HNDR),), jnp.float32).reshape(shape_HNDR)
  # All rounds of a head in one GEMM: [X, D] @ [D, N * R] runs near the CPU's matmul peak.
  rotations_HDM = jnp.transpose(rotations_HNDR, (0, 2, 1, 3)).reshape(
    (n_heads, head_dim, n_hashes * n_rotations)
  )

  def bucket_of_positions(x_HBXD):
    rotated_HBXM = jnp.einsum("hbxd,hdm->hbxm", x_HBXD, rotations_HDM)
    rotated_HBXNR = rotated_HBXM.reshape(rotated_HBXM.shape[:3] + (n_hashes, n_rotations))
    buckets_HBXN, start, radix = 0, 0, 1
    for factor, half in zip(factors, half_factors):
      digit_HBXN = _argmax_of_both_signs(rotated_HBXNR[..., start : start + half])
      buckets_HBXN, start, radix = buckets_HBXN + radix * digit_HBXN, start + half, radix * factor
    return buckets_HBXN

  # Buckets come from an integer argmax, so they carry no gradient; stopping it here keeps the
  # hashing out of the backward pass, which reuses the forward buckets.
  x_HBLD = jnp.transpose(jax.lax.stop_gradient(qk_BLHD).astype(jnp.float32), (2, 0, 1, 3))
  block_values = min(_HASH_BLOCK_VALUES, _HASH_BLOCK_VALUES_PER_POSITION * length)
  max_block = max(1, block_values // (batch * n_hashes * n_rotations))
  n_blocks = next(n for n in range(-(-length // max_block), length + 1) if length % n == 0)
  x_KHBXD = jnp.moveaxis(
    x_HBLD.reshape((n_heads, batch, n_blocks, length // n_blocks, head_dim)), 2, 0
  )
  if n_blocks == 1:
    buckets_KHBXN = bucket_of_positions(x_KHBXD[0])[None]
  else:
    buckets_KHBXN = jax.lax.map(bucket_of_positions, x_KHBXD)
  buckets_BHNKX = jnp.transpose(buckets_KHBXN, (2, 1, 4, 0, 3))
  buckets_BHNL = buckets_BHNKX.reshape((batch, n_heads, n_hashes, length))
  offsets_N = jnp.arange(n_hashes, dtype=jnp.int32) * math.prod(factors)
  return buckets_BHNL.astype(jnp.int32) + offsets_N[None, None, :, None]
