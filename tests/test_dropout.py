"""Dropout from 16-bit halves: the right keep rate, exact scaling, deterministic per key."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models.dropout import dropout


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_keep_rate_and_scaling(rate):
  x = jnp.ones((64, 128, 77))  # Odd last dimension: the unused half-word is dropped.
  y = np.asarray(dropout(x, rate, jax.random.key(0)))
  kept = y != 0
  assert abs(kept.mean() - (1 - rate)) < 4 * np.sqrt(rate * (1 - rate) / kept.size)
  np.testing.assert_allclose(y[kept], 1.0 / (1.0 - rate), rtol=1e-6)
  # Both halves of the words are used, each with the right rate.
  assert abs(kept[..., :39].mean() - kept[..., 39:].mean()) < 0.01


def test_deterministic_per_key_and_independent_across_keys():
  x = jnp.ones((32, 256))
  a, b = dropout(x, 0.1, jax.random.key(1)), dropout(x, 0.1, jax.random.key(1))
  np.testing.assert_array_equal(a, b)
  c = np.asarray(dropout(x, 0.1, jax.random.key(2)))
  agreement = np.mean((np.asarray(a) != 0) == (c != 0))
  assert agreement < 0.85  # Independent masks agree on 0.9^2 + 0.1^2 = 82% of elements.


def test_rate_zero_is_identity():
  x = jnp.arange(10.0)
  assert dropout(x, 0.0, jax.random.key(0)) is x
