"""Tests for chunked local attention: dense banded equivalence, dtypes, errors, memory."""

import functools
import math

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models.attention import local, masks

BATCH, LENGTH, HEADS, HEAD_DIM, CHUNK = 2, 64, 2, 8, 8


def _inputs(seed=0, dtype=jnp.float32):
  """Random q/k/v, two packed documents in row 0, trailing padding in row 1."""
  keys = jax.random.split(jax.random.PRNGKey(seed), 4)
  shape = (BATCH, LENGTH, HEADS, HEAD_DIM)
  query, key, value = (jax.random.normal(k, shape, dtype) for k in keys[:3])
  positions_L = np.arange(LENGTH)
  segment_ids_BL = jnp.asarray(
    np.stack([np.where(positions_L < 27, 1, 2), np.where(positions_L < LENGTH - 13, 1, 0)]),
    jnp.int32,
  )
  # Padding queries have no visible key; their outputs are unspecified and left out.
  valid_BL11 = (segment_ids_BL != 0)[:, :, None, None]
  cotangent_BLHD = jax.random.normal(keys[3], shape) * valid_BL11
  return query, key, value, segment_ids_BL, valid_BL11, cotangent_BLHD


def _dense_banded_attention(
  query_BLHD,
  key_BLHD,
  value_BLHD,
  segment_ids_BL,
  *,
  chunk_len,
  n_chunks_before,
  n_chunks_after,
  causal,
):
  """Full L x L attention with an explicit mask of which chunks each query's chunk may see."""
  chunk_L = np.arange(LENGTH) // chunk_len
  chunk_offset_LL = chunk_L[None, :] - chunk_L[:, None]
  band_LL = (chunk_offset_LL >= -n_chunks_before) & (chunk_offset_LL <= n_chunks_after)
  if causal:
    band_LL &= np.tril(np.ones((LENGTH, LENGTH), bool))
  allowed_B1LL = masks.segment_mask(segment_ids_BL, segment_ids_BL) & band_LL[None, None]
  logits_BHLL = jnp.einsum("bqhd,bkhd->bhqk", query_BLHD, key_BLHD) / math.sqrt(HEAD_DIM)
  logits_BHLL = jnp.where(allowed_B1LL, logits_BHLL, masks.large_negative(jnp.float32))
  return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits_BHLL, axis=-1), value_BLHD)


def _outputs_and_grads(attention_fn, query, key, value, segment_ids, cotangent):
  @jax.jit
  def run(query, key, value):
    out, vjp = jax.vjp(lambda q, k, v: attention_fn(q, k, v, segment_ids), query, key, value)
    return out, vjp(cotangent)

  return run(query, key, value)


@pytest.mark.parametrize(
  "n_chunks_before,n_chunks_after,causal",
  [(1, 0, False), (1, 0, True), (0, 0, False), (2, 1, False), (1, 1, True)],
)
def test_matches_dense_banded_attention(n_chunks_before, n_chunks_after, causal):
  query, key, value, segment_ids, valid, cotangent = _inputs()
  window = dict(
    chunk_len=CHUNK, n_chunks_before=n_chunks_before, n_chunks_after=n_chunks_after, causal=causal
  )
  out_a, grads_a = _outputs_and_grads(
    functools.partial(local.local_attention, **window), query, key, value, segment_ids, cotangent
  )
  out_b, grads_b = _outputs_and_grads(
    functools.partial(_dense_banded_attention, **window), query, key, value, segment_ids, cotangent
  )
  np.testing.assert_allclose(out_a * valid, out_b * valid, atol=1e-5, rtol=1e-5)
  for grad_a, grad_b in zip(grads_a, grads_b):
    np.testing.assert_allclose(grad_a, grad_b, atol=1e-5, rtol=1e-5)


def test_bfloat16_is_finite_and_close_to_float32():
  query, key, value, segment_ids, valid, _ = _inputs(seed=1, dtype=jnp.bfloat16)
  attend = jax.jit(functools.partial(local.local_attention, chunk_len=CHUNK, causal=True))
  out_bf16 = attend(query, key, value, segment_ids)
  out_f32 = attend(*(x.astype(jnp.float32) for x in (query, key, value)), segment_ids)
  assert out_bf16.dtype == jnp.bfloat16
  assert bool(jnp.all(jnp.isfinite(out_bf16)))  # padding queries included
  # bf16 keeps 8 mantissa bits (relative step 2^-8); outputs are O(1) averages of values.
  np.testing.assert_allclose(
    np.asarray(out_bf16, np.float32) * valid, out_f32 * valid, atol=5e-2, rtol=0
  )


@pytest.mark.parametrize(
  "kwargs,message",
  [
    (dict(chunk_len=24), "pad the sequence to a multiple of chunk_len"),
    (dict(chunk_len=8, n_chunks_before=-1), "must be >= 0"),
  ],
)
def test_bad_arguments_raise(kwargs, message):
  query, key, value, segment_ids, _, _ = _inputs()
  with pytest.raises(ValueError, match=message):
    local.local_attention(query, key, value, segment_ids, **kwargs)


def _avals(jaxpr):
  for eqn in jaxpr.eqns:
    for var in eqn.outvars:
      yield var.aval
  for sub in jex_core.subjaxprs(jaxpr):
    yield from _avals(sub)


def test_memory_is_linear_in_length():
  """No intermediate of the forward+backward pass has two dimensions as long as the sequence."""
  length = 2048
  x_BLHD = jnp.zeros((1, length, 1, 4))
  segment_ids_BL = jnp.ones((1, length), jnp.int32)

  def loss(q, k, v):
    return jnp.sum(
      local.local_attention(
        q, k, v, segment_ids_BL, chunk_len=32, n_chunks_before=1, n_chunks_after=1, causal=True
      )
    )

  jaxpr = jax.make_jaxpr(jax.grad(loss, argnums=(0, 1, 2)))(x_BLHD, x_BLHD, x_BLHD).jaxpr
  shapes = [aval.shape for aval in _avals(jaxpr) if hasattr(aval, "shape")]
  assert not any(sum(dim >= length for dim in shape) >= 2 for shape in shapes)
  assert max(int(np.prod(shape)) for shape in shapes) <= length * 3 * 32
