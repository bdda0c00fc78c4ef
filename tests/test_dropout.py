"""Dropout from a counter-based hash: the right keep rate, exact scaling, deterministic per key,
independent across rows, columns and keys, the same mask however the array is sharded, and a
backward pass that draws the mask again."""

import contextlib
import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import ad_checkpoint
from jax.sharding import NamedSharding, PartitionSpec

from bert_jax.models.dropout import dropout, keep_mask


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_keep_rate_and_scaling(rate):
  x = jnp.ones((64, 128, 77))
  y = np.asarray(dropout(x, rate, jax.random.key(0)))
  kept = y != 0
  assert abs(kept.mean() - (1 - rate)) < 4 * np.sqrt(rate * (1 - rate) / kept.size)
  np.testing.assert_allclose(y[kept], 1.0 / (1.0 - rate), rtol=1e-6)
  # Every column and every row position keeps about 1 - rate.
  assert np.abs(kept.mean(axis=(0, 1)) - (1 - rate)).max() < 0.05
  assert np.abs(kept.mean(axis=(0, 2)) - (1 - rate)).max() < 0.05


def test_neighbouring_rows_and_columns_are_independent():
  kept = np.asarray(keep_mask((256, 512), 0.5, jax.random.key(3)))
  # Two independent fair masks agree on half their elements.
  for a, b in ((kept[1:], kept[:-1]), (kept[:, 1:], kept[:, :-1]), (kept[:, ::2], kept[:, 1::2])):
    assert abs(np.mean(a == b) - 0.5) < 0.01
  # No two rows are the same mask.
  assert len({row.tobytes() for row in kept}) == kept.shape[0]


def test_deterministic_per_key_and_independent_across_keys():
  x = jnp.ones((32, 256))
  a, b = dropout(x, 0.1, jax.random.key(1)), dropout(x, 0.1, jax.random.key(1))
  np.testing.assert_array_equal(a, b)
  c = np.asarray(dropout(x, 0.1, jax.random.key(2)))
  agreement = np.mean((np.asarray(a) != 0) == (c != 0))
  assert abs(agreement - 0.82) < 0.02  # Independent masks agree on 0.9^2 + 0.1^2 = 82%.


def test_the_mask_does_not_depend_on_the_sharding():
  mesh = jax.make_mesh((8,), ("data",))
  shape, key = (16, 24, 40), jax.random.key(5)
  unsharded = jax.jit(lambda k: keep_mask(shape, 0.1, k))(key)
  sharded = jax.jit(
    lambda k: keep_mask(shape, 0.1, k),
    out_shardings=NamedSharding(mesh, PartitionSpec("data")),
  )(key)
  assert len(sharded.sharding.device_set) == 8
  np.testing.assert_array_equal(np.asarray(sharded), np.asarray(unsharded))


def test_rows_that_would_wrap_are_refused():
  with pytest.raises(ValueError, match="at most 2\\*\\*32 - 1 rows"):
    jax.eval_shape(lambda k: keep_mask((2**16, 2**16, 2), 0.1, k), jax.random.key(0))


def test_rate_zero_is_identity():
  x = jnp.arange(10.0)
  assert dropout(x, 0.0, jax.random.key(0)) is x


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_the_gradient_drops_and_scales_what_the_forward_did_and_keeps_no_mask(dtype):
  x = jax.random.normal(jax.random.key(1), (6, 9, 40)).astype(dtype)
  weights = jax.random.normal(jax.random.key(2), x.shape).astype(dtype)
  key, rate = jax.random.key(5), 0.3
  grad = jax.grad(lambda x: jnp.sum(dropout(x, rate, key) * weights).astype(jnp.float32))(x)
  keep = keep_mask(x.shape, rate, key)
  # What autodiff of the forward's ``x / (1 - rate)`` gives, in x's dtype.
  kept_share = jnp.asarray(1.0 - rate, dtype)
  assert grad.dtype == dtype
  np.testing.assert_array_equal(grad, jnp.where(keep, weights / kept_share, jnp.zeros((), dtype)))
  # The backward draws the mask again from the key's two words: nothing of x's size is kept
  # (a scanned model would stack such a mask for every layer).
  saved = io.StringIO()
  with contextlib.redirect_stdout(saved):
    ad_checkpoint.print_saved_residuals(lambda x: dropout(x, rate, key), x)
  assert "6,9,40" not in saved.getvalue(), saved.getvalue()
