"""The hand-written backward of dense attention equals autodiff of the reference kernel."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models.attention import dense
from bert_jax.models.attention import layer as layer_lib
from bert_jax.models.attention.layer import SelfAttention
from bert_jax.models.config import ModelConfig

BATCH, LENGTH, HEADS, HEAD_DIM = 3, 40, 2, 16


def _segment_ids():
  """Padding, packed documents, and a row of padding only (every logit of a query masked)."""
  ids = np.zeros((BATCH, LENGTH), np.int32)
  ids[0, :25] = 1  # One document, then padding.
  ids[1, :10], ids[1, 10:33] = 1, 2  # Two packed documents, then padding.
  return jnp.asarray(ids)  # Row 2 is all padding.


def _inputs(dtype):
  keys = jax.random.split(jax.random.key(0), 4)
  shape = (BATCH, LENGTH, HEADS, HEAD_DIM)
  qkv = tuple(2 * jax.random.normal(k, shape, jnp.float32).astype(dtype) for k in keys[:3])
  # Weights on every position, padding included, so fully masked rows are differentiated too.
  return qkv, jax.random.normal(keys[3], shape, jnp.float32)


@pytest.mark.parametrize("dropout_rate", [0.0, 0.1])
@pytest.mark.parametrize("dtype, tol", [(jnp.float32, 2e-6), (jnp.bfloat16, 2e-2)])
def test_output_and_gradients_match_autodiff_of_the_reference(dtype, tol, dropout_rate):
  qkv, weights = _inputs(dtype)
  segment_ids_BL = _segment_ids()
  rng = jax.random.key(7)

  def reference(*qkv):
    return dense.dense_attention(
      *qkv, segment_ids_BL, dropout_rate=dropout_rate, dropout_rng=rng, deterministic=False
    )

  def custom(*qkv):
    return dense.dense_attention_vjp(
      *qkv, segment_ids_BL, dropout_rate=dropout_rate, dropout_rng=rng
    )

  def loss(fn, *qkv):
    return jnp.sum(fn(*qkv).astype(jnp.float32) * weights)

  grad = jax.jit(jax.value_and_grad(loss, argnums=(1, 2, 3)), static_argnums=0)
  want_loss, want = grad(reference, *qkv)
  got_loss, got = grad(custom, *qkv)
  # The same dropout mask: in float32 the outputs are the same numbers.
  out, want_out = (np.asarray(fn(*qkv), np.float32) for fn in (custom, reference))
  np.testing.assert_allclose(out, want_out, atol=0 if dtype == jnp.float32 else tol * 4)
  np.testing.assert_allclose(
    float(got_loss), float(want_loss), rtol=1e-6 if dtype == jnp.float32 else tol
  )
  for name, g, w in zip("qkv", got, want):
    assert g.dtype == dtype, name
    g, w = np.asarray(g, np.float32), np.asarray(w, np.float32)
    np.testing.assert_allclose(g, w, atol=tol * np.abs(w).max(), err_msg=name)


def test_layer_trains_through_the_custom_backward_and_keeps_probabilities_on_request():
  config = ModelConfig(
    hidden_size=HEADS * HEAD_DIM,
    num_heads=HEADS,
    num_layers=1,
    intermediate_size=64,
    attention_dropout_rate=0.0,
    attention_kind="dense",
    max_position_embeddings=LENGTH,
  )
  layer = SelfAttention(config, deterministic=False)
  x_BLD = jax.random.normal(jax.random.key(1), (BATCH, LENGTH, HEADS * HEAD_DIM))
  segment_ids_BL = _segment_ids()
  params = layer.init(jax.random.key(2), x_BLD, segment_ids_BL)

  def loss(params, mutable):
    out, state = layer.apply(params, x_BLD, segment_ids_BL, mutable=mutable)
    return jnp.sum(out**2), state

  (plain, state), grads = jax.value_and_grad(loss, has_aux=True)(params, [])
  jaxpr = str(jax.make_jaxpr(lambda p: loss(p, [])[0])(params))
  assert "custom_vjp_call" in jaxpr and not state
  (probed, state), probed_grads = jax.value_and_grad(loss, has_aux=True)(params, ["intermediates"])
  (probs_BHQK,) = state["intermediates"]["attention_probs"]
  assert probs_BHQK.shape == (BATCH, HEADS, LENGTH, LENGTH)
  np.testing.assert_allclose(float(probed), float(plain), rtol=1e-6)
  # One scale for all leaves: the key bias's true gradient is 0 (softmax ignores a shift).
  scale = max(float(jnp.abs(w).max()) for w in jax.tree.leaves(probed_grads))
  for g, w in zip(jax.tree.leaves(grads), jax.tree.leaves(probed_grads)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=1e-6 * scale)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_fused_projection_into_heads_equals_one_gemm_per_projection(dtype):
  """Accelerators run query/key/value as one contraction, CPUs as three GEMMs: same numbers."""
  keys = jax.random.split(jax.random.key(3), 7)
  x_BLD = jax.random.normal(keys[0], (BATCH, LENGTH, 32))
  weights = tuple(
    (
      jax.random.normal(keys[i], (32, HEADS, HEAD_DIM)),
      jax.random.normal(keys[i + 3], (HEADS, HEAD_DIM)),
    )
    for i in (1, 2, 3)
  )
  fused = layer_lib.project_into_heads(x_BLD, weights, dtype, fused=True)
  gemms = layer_lib.project_into_heads(x_BLD, weights, dtype, fused=False)
  tol = 1e-5 if dtype == jnp.float32 else 2e-2
  for got, want in zip(fused, gemms):
    assert got.shape == (BATCH, LENGTH, HEADS, HEAD_DIM) and got.dtype == dtype
    np.testing.assert_allclose(
      np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=tol, atol=tol
    )
