"""Inverted dropout whose mask is a counter-based hash of the element's position.

Whether element (row, column) survives is a pure function of the dropout key and its global
indices: the flattened index of all dimensions but the last (the row) and the index in the last
(the column). Rows and columns are hashed once each, with murmur3's 32-bit finaliser, and an
element costs one xor and one more finaliser. No random bits are drawn or stored: JAX's threefry
words (two 16-bit decisions each, before) took 6% of BERT-base's step in libtpu's estimate on a
v5p and were written to memory as u32 arrays, where the hash fuses into the op that applies it
(the step's estimate fell from 24.0 to 22.2 ms, its bytes accessed by 7%). A function of
``(shape, rate, key)`` only, so a backward pass draws the same mask again instead of keeping it,
and global indices make it the same however the array is sharded. The keep probability is
quantised to 2**-32.
"""

import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp

# murmur3's 32-bit finaliser constants, and the golden ratio's (an odd constant whose bits
# look random, so that column 0 does not hash to 0).
_FMIX_1, _FMIX_2, _GOLDEN = 0x85EBCA6B, 0xC2B2AE35, 0x9E3779B9


def fmix32(x):
  """murmur3's finaliser: a bijection on uint32 whose every input bit flips half the output."""
  x = x ^ (x >> 16)
  x = x * jnp.uint32(_FMIX_1)
  x = x ^ (x >> 13)
  x = x * jnp.uint32(_FMIX_2)
  return x ^ (x >> 16)


def column_hash(column):
  """The hash of uint32 column indices that rows are combined with (`keep_from_hashes`)."""
  return fmix32(column ^ jnp.uint32(_GOLDEN))


def keep_from_hashes(hashed_row, hashed_column, rate: float):
  """True where the element of a hashed row and column survives dropout (broadcasting):
  kept iff fmix32(row ^ column) >= round(rate * 2**32)."""
  threshold = min(round(rate * 2**32), 2**32 - 1)
  return fmix32(hashed_row ^ hashed_column) >= jnp.uint32(threshold)


def keep_mask(shape, rate: float, rng):
  """Boolean [shape]: True where an element survives dropout at ``rate``.

  Raises:
    ValueError: when the dimensions before the last hold 2**32 rows or more (their indices
      would wrap and repeat masks).
  """
  return _keep_mask_of_seed(shape, rate, jax.random.bits(rng, (2,), jnp.uint32))


# Jitted on its own so that each shape's hash is traced once per process: a model applies dropout
# of a few shapes at many sites (and again in the backward pass), and tracing the hash's integer
# ops anew at each was about a third of the time to trace a tiny BERT's train step. XLA inlines
# the call, so the compiled step is the same.
@functools.partial(jax.jit, static_argnums=(0, 1))
def _keep_mask_of_seed(shape, rate: float, seed):
  """`keep_mask` of the two uint32 words a key draws."""
  rows = math.prod(shape[:-1])
  if rows >= 2**32:
    raise ValueError(f"dropout over {rows} rows of shape {shape}: at most 2**32 - 1 rows")
  row = jnp.arange(rows, dtype=jnp.uint32).reshape(tuple(shape[:-1]) + (1,))
  row_hash = fmix32(fmix32(row ^ seed[0]) ^ seed[1])
  column = jnp.arange(shape[-1], dtype=jnp.uint32).reshape((1,) * (len(shape) - 1) + (-1,))
  return keep_from_hashes(row_hash, column_hash(column), rate)


def dropout(x, rate: float, rng):
  """Zeroes each element with probability ``rate`` and scales the rest by 1 / (1 - rate).

  The backward pass draws the mask again from the key's two words rather than keeping it:
  autodiff would keep the boolean mask, which XLA recomputes inside the fusions that read it in
  an unrolled step, but which a scanned body (`model.scan_layers`) writes out for every layer
  (two [B, L, H] masks a BERT layer, 0.75 GiB of BERT-large's residuals on an H100 at 128 × 128).

  Args:
    x: activations.
    rate: drop probability in [0, 1).
    rng: PRNG key.

  Returns:
    Array like ``x``.
  """
  if rate <= 0.0:
    return x
  return _dropout_of_seed(x, jax.random.bits(rng, (2,), jnp.uint32), rate)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _dropout_of_seed(x, seed, rate):
  """`dropout` with the key's two uint32 words (``seed``) drawn."""
  keep = _keep_mask_of_seed(x.shape, rate, seed)
  return jnp.where(keep, x / jnp.asarray(1.0 - rate, x.dtype), jnp.zeros((), x.dtype))


def _dropout_forward(x, seed, rate):
  return _dropout_of_seed(x, seed, rate), seed


def _dropout_backward(rate, seed, d_y):
  # The same mask and scale applied to the gradient; the integer seed has none.
  return _dropout_of_seed(d_y, seed, rate), None


_dropout_of_seed.defvjp(_dropout_forward, _dropout_backward)


class Dropout(nn.Module):
  """`dropout` as a layer drawing from the ``dropout`` rng stream."""

  rate: float

  @nn.compact
  def __call__(self, x, deterministic: bool):
    if deterministic or self.rate <= 0.0:
      return x
    return dropout(x, self.rate, self.make_rng("dropout"))
