"""The relative-attention kernel equals its slow, pair-by-pair reference (outputs and grads)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models.attention import relative
from bert_jax.models.attention.relative_reference import reference_relative_attention

B, Q, M, H, D = 2, 6, 4, 2, 8
K = M + Q


def _inputs(seed=0):
  keys = jax.random.split(jax.random.key(seed), 9)
  normal = lambda key, shape: jax.random.normal(key, shape, jnp.float32)
  floats = {
    "query_BQHD": normal(keys[0], (B, Q, H, D)),
    "key_BKHD": normal(keys[1], (B, K, H, D)),
    "value_BKHD": normal(keys[2], (B, K, H, D)),
    "position_key_PHD": normal(keys[3], (K + Q, H, D)),
    "content_bias_HD": normal(keys[4], (H, D)),
    "position_bias_HD": normal(keys[5], (H, D)),
    "segment_bias_HD": normal(keys[6], (H, D)),
    "segment_embed_2HD": normal(keys[7], (2, H, D)),
  }
  # Row 1 has its last two current tokens padded (memory is always visible); every query may
  # see itself, so no row is empty.
  key_real_BK = np.ones((B, K), bool)
  key_real_BK[1, -2:] = False
  mask_BQK = key_real_BK[:, None, :] | (
    np.arange(K)[None, None, :] == M + np.arange(Q)[None, :, None]
  )
  types_BK = np.array(jax.random.bernoulli(keys[8], 0.5, (B, K)))
  segment_differs_BQK = types_BK[:, M:, None] != types_BK[:, None, :]
  return floats, jnp.asarray(mask_BQK), jnp.asarray(segment_differs_BQK)


def _run(kernel, floats, mask_BQK, segment_differs_BQK, deterministic):
  floats = dict(floats)
  segment = {
    "segment_differs_BQK": segment_differs_BQK,
    "segment_bias_HD": floats.pop("segment_bias_HD"),
    "segment_embed_2HD": floats.pop("segment_embed_2HD"),
  }
  return kernel(
    **floats,
    mask_BQK=mask_BQK,
    **segment,
    dropout_rate=0.25,
    dropout_rng=jax.random.key(7),
    deterministic=deterministic,
  )


@pytest.mark.parametrize("deterministic", [True, False])
def test_kernel_equals_reference_on_outputs_and_gradients(deterministic):
  floats, mask_BQK, segment_differs_BQK = _inputs()
  cotangent_BQHD = jax.random.normal(jax.random.key(3), (B, Q, H, D))

  def loss(kernel):
    return lambda f: jnp.sum(
      _run(kernel, f, mask_BQK, segment_differs_BQK, deterministic) * cotangent_BQHD
    )

  fast, fast_grads = jax.value_and_grad(loss(relative.relative_attention))(floats)
  slow, slow_grads = jax.value_and_grad(loss(reference_relative_attention))(floats)
  np.testing.assert_allclose(fast, slow, rtol=1e-5)
  out_fast = _run(relative.relative_attention, floats, mask_BQK, segment_differs_BQK, deterministic)
  out_slow = _run(
    reference_relative_attention, floats, mask_BQK, segment_differs_BQK, deterministic
  )
  np.testing.assert_allclose(out_fast, out_slow, atol=1e-5)
  for name in floats:
    assert float(jnp.max(jnp.abs(slow_grads[name]))) > 0, name
    np.testing.assert_allclose(fast_grads[name], slow_grads[name], atol=1e-5, err_msg=name)


def test_shift_maps_each_pair_to_its_distance():
  # Fill the unshifted scores with the distance each column stands for: after the shift,
  # entry (i, j) must be query i's absolute position minus key j's.
  distances_P = relative.relative_distances(Q, K)
  scores_BHQP = jnp.broadcast_to(distances_P[None, None, None, :], (1, 1, Q, K + Q))
  shifted_QK = relative.relative_shift(scores_BHQP, K)[0, 0]
  expected_QK = (M + np.arange(Q))[:, None] - np.arange(K)[None, :]
  np.testing.assert_array_equal(shifted_QK, expected_QK)


def test_masked_keys_do_not_move_the_output():
  floats, mask_BQK, segment_differs_BQK = _inputs()
  out = _run(relative.relative_attention, floats, mask_BQK, segment_differs_BQK, True)
  changed = dict(floats)
  changed["key_BKHD"] = floats["key_BKHD"].at[1, -1].add(100.0)
  changed["value_BKHD"] = floats["value_BKHD"].at[1, -1].add(100.0)
  moved = _run(relative.relative_attention, changed, mask_BQK, segment_differs_BQK, True)
  # Row 1's last key is padding: only its own query (the last one) may see it.
  np.testing.assert_allclose(moved[1, :-1], out[1, :-1], atol=1e-6)
  assert float(jnp.max(jnp.abs(moved[1, -1] - out[1, -1]))) > 1.0
