"""`layers.tied_logits`: float32 logits through the tied word table, whose backward runs its
two products in the compute dtype (autodiff kept the [tokens, V] gradient in float32)."""

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.models import layers


def _inputs(dtype):
  table = jax.random.normal(jax.random.key(0), (50, 16), jnp.float32)
  x = jax.random.normal(jax.random.key(1), (3, 4, 16), jnp.float32).astype(dtype)
  d_logits = jax.random.normal(jax.random.key(2), (3, 4, 50), jnp.float32)
  return table, x, d_logits


def _autodiff(table, x):
  return jnp.einsum("bpd,vd->bpv", x, table.astype(x.dtype), preferred_element_type=jnp.float32)


def test_float32_values_and_gradients_equal_autodiff():
  table, x, d_logits = _inputs(jnp.float32)
  got, got_vjp = jax.vjp(layers.tied_logits, table, x)
  want, want_vjp = jax.vjp(_autodiff, table, x)
  np.testing.assert_array_equal(got, want)
  for g, w in zip(got_vjp(d_logits), want_vjp(d_logits)):
    assert g.dtype == w.dtype
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_bf16_backward_multiplies_in_bf16_and_stays_close_to_float32():
  table, x, d_logits = _inputs(jnp.bfloat16)
  logits, vjp = jax.vjp(layers.tied_logits, table, x)
  assert logits.dtype == jnp.float32
  backward = jax.make_jaxpr(vjp)(d_logits)
  products = [e for e in backward.jaxpr.eqns if e.primitive.name == "dot_general"]
  assert len(products) == 2
  assert all(v.aval.dtype == jnp.bfloat16 for e in products for v in e.invars)
  d_table, d_x = vjp(d_logits)
  assert (d_table.dtype, d_x.dtype) == (jnp.float32, jnp.bfloat16)
  want_table, want_x = jax.vjp(_autodiff, table, x.astype(jnp.float32))[1](d_logits)
  np.testing.assert_allclose(d_table, want_table, rtol=2e-2, atol=5e-2)
  np.testing.assert_allclose(np.asarray(d_x, np.float32), want_x, rtol=2e-2, atol=1e-1)
