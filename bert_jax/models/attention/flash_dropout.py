"""The dropout mask of the flash attention kernels: a counter-based hash, no stored bits.

Whether attention probability (b, h, q, k) is kept is a pure function of the dropout rng's
seed and those four indices, so the forward and backward kernels regenerate the same mask
tile by tile. Each (sequence, head) gets a 32-bit stream word (`streams_BH`, from global
indices, so sharding the batch or heads does not change the mask); inside a stream, row and
column are mixed with murmur3's 32-bit finaliser and combined. An element is kept iff its hash
is >= round(rate * 2**32): the keep probability is quantised to 2**-32.
"""

import jax
import jax.numpy as jnp

from bert_jax.models.dropout import column_hash, fmix32, keep_from_hashes


def streams_BH(dropout_rng, batch: int, heads: int):
  """uint32 [batch, heads]: the hash stream of each sequence and head, from the rng's bits."""
  seed = jax.random.bits(dropout_rng, (2,), jnp.uint32)
  b_B1 = jnp.arange(batch, dtype=jnp.uint32)[:, None]
  h_1H = jnp.arange(heads, dtype=jnp.uint32)[None, :]
  return fmix32(fmix32(fmix32(b_B1 ^ seed[0]) ^ h_1H) ^ seed[1])


def keep(stream, query_pos, key_pos, rate: float):
  """True where element (query_pos, key_pos) of ``stream`` survives dropout (broadcasting).

  The same function of uint32 positions inside the kernels (block iotas) and outside them
  (`keep_mask_BHQK`). Row and column are mixed separately, so a [q, k] tile costs one xor and
  one finaliser per element. Kept iff the hash >= round(rate * 2**32).
  """
  return keep_from_hashes(fmix32(stream ^ query_pos), column_hash(key_pos), rate)


def positions(start, size: int, axis: int):
  """uint32 positions ``start + iota`` as [size, 1] (axis 0) or [1, size] (axis 1).

  The kernels' block iotas, offset to global positions, as `keep` takes them.
  """
  shape = (size, 1) if axis == 0 else (1, size)
  return (start + jax.lax.broadcasted_iota(jnp.int32, shape, axis)).astype(jnp.uint32)


def keep_mask_BHQK(dropout_rng, shape, rate: float):
  """The dropout mask `flash_attention` applies for ``dropout_rng``, as a whole array.

  Args:
    dropout_rng: the PRNG key given to `flash_attention`.
    shape: (batch, heads, query length, key length).
    rate: the dropout rate.

  Returns:
    bool [batch, heads, query, key]: True where a probability is kept.
  """
  batch, heads, length_q, length_k = shape
  stream_BH11 = streams_BH(dropout_rng, batch, heads)[:, :, None, None]
  q_11Q1 = jnp.arange(length_q, dtype=jnp.uint32)[None, None, :, None]
  k_111K = jnp.arange(length_k, dtype=jnp.uint32)[None, None, None, :]
  return keep(stream_BH11, q_11Q1, k_111K, rate)
