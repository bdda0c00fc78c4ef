"""The vocabulary cross-entropy equals optax's, value and gradient, without its scatter-add."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bert_jax.tasks.cross_entropy import softmax_cross_entropy


def _inputs(dtype, classes=37):
  keys = jax.random.split(jax.random.key(0), 3)
  logits = (4 * jax.random.normal(keys[0], (3, 5, classes))).astype(dtype)
  labels = jax.random.randint(keys[1], (3, 5), 0, classes)
  d_loss = jax.random.normal(keys[2], (3, 5))
  return logits, labels, d_loss


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_values_and_gradients_equal_optax_on_float32_logits(dtype):
  """Over two leading dimensions; the gradient comes back in the logits' dtype, equal to
  optax's float32 gradient rounded once."""
  logits, labels, d_loss = _inputs(dtype)
  got, got_vjp = jax.vjp(lambda x: softmax_cross_entropy(x, labels), logits)
  want, want_vjp = jax.vjp(
    lambda x: optax.softmax_cross_entropy_with_integer_labels(x.astype(jnp.float32), labels),
    logits,
  )
  assert got.dtype == jnp.float32
  np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
  (d_got,), (d_want,) = got_vjp(d_loss), want_vjp(d_loss)
  assert d_got.dtype == dtype
  tolerance = 1e-6 if dtype == jnp.float32 else 8e-3
  np.testing.assert_allclose(
    np.asarray(d_got, np.float32), np.asarray(d_want, np.float32), rtol=tolerance, atol=tolerance
  )


def test_extreme_logits_stay_finite():
  """Rows far from 0 (the log-normaliser is taken about each row's maximum)."""
  logits = jnp.array([[1e4, 0.0, -1e4], [-1e4, -1e4 + 1.0, -1e4 - 1.0]], jnp.float32)
  labels = jnp.array([1, 1])
  loss, vjp = jax.vjp(lambda x: softmax_cross_entropy(x, labels), logits)
  want = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
  np.testing.assert_allclose(loss, want, rtol=1e-6)
  assert np.all(np.isfinite(vjp(jnp.ones(2))[0]))


def test_the_backward_is_elementwise_with_no_scatter():
  """optax's gradient scatter-adds a one-hot [N, C] array; this one compares an iota with the
  labels inside the one elementwise expression."""
  logits, labels, _ = _inputs(jnp.bfloat16)

  def backward_text(loss_fn):
    return str(jax.make_jaxpr(jax.grad(lambda x: jnp.sum(loss_fn(x, labels))))(logits))

  assert "scatter-add" in backward_text(
    lambda x, y: optax.softmax_cross_entropy_with_integer_labels(x.astype(jnp.float32), y)
  )
  text = backward_text(softmax_cross_entropy)
  assert "scatter" not in text and "iota" in text
