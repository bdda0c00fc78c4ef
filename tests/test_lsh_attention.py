"""Tests for Reformer LSH attention: dense and reference equivalence, convergence, dtype, memory."""

import functools

import flax.linen
import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.errors import UserInputError
from bert_jax.models.attention import lsh, lsh_chunks, lsh_hashing
from bert_jax.models.attention.layer import SelfAttention
from bert_jax.models.config import LshOptions, ModelConfig

BATCH, LENGTH, HEADS, HEAD_DIM = 2, 64, 2, 8


def _inputs(seed=0, length=LENGTH, dtype=jnp.float32):
  """Random qk/value, with two packed documents in row 0 and trailing padding in row 1."""
  key_qk, key_value, key_cot = jax.random.split(jax.random.PRNGKey(seed), 3)
  shape = (BATCH, length, HEADS, HEAD_DIM)
  qk_BLHD = jax.random.normal(key_qk, shape, dtype)
  value_BLHD = jax.random.normal(key_value, shape, dtype)
  positions_L = np.arange(length)
  segment_ids_BL = jnp.asarray(
    np.stack(
      [np.where(positions_L < length // 3, 1, 2), np.where(positions_L < length - 14, 1, 0)]
    ),
    jnp.int32,
  )
  # Outputs of padding queries are unspecified, so the test functional ignores them.
  valid_BL11 = (segment_ids_BL != 0)[:, :, None, None]
  cotangent_BLHD = jax.random.normal(key_cot, shape) * valid_BL11
  return qk_BLHD, value_BLHD, segment_ids_BL, valid_BL11, cotangent_BLHD


def _outputs_and_grads(attention_fn, qk_BLHD, value_BLHD, segment_ids_BL, cotangent_BLHD):
  """Outputs and the gradient of <out, cotangent> w.r.t. qk and value, in one compiled call."""

  @jax.jit
  def run(qk_BLHD, value_BLHD):
    out_BLHD, vjp = jax.vjp(
      lambda qk, value: attention_fn(qk, value, segment_ids_BL), qk_BLHD, value_BLHD
    )
    return out_BLHD, vjp(cotangent_BLHD)

  return run(qk_BLHD, value_BLHD)


def _assert_same(result_a, result_b, valid_BL11, tol=1e-5):
  (out_a, (dqk_a, dvalue_a)), (out_b, (dqk_b, dvalue_b)) = result_a, result_b
  np.testing.assert_allclose(out_a * valid_BL11, out_b * valid_BL11, atol=tol, rtol=tol)
  np.testing.assert_allclose(dqk_a, dqk_b, atol=tol, rtol=tol)
  np.testing.assert_allclose(dvalue_a, dvalue_b, atol=tol, rtol=tol)


@pytest.mark.parametrize("n_hashes,causal", [(1, False), (3, True)])
def test_one_chunk_equals_dense_attention(n_hashes, causal):
  qk, value, segment_ids, valid, cotangent = _inputs()
  lsh_fn = functools.partial(
    lsh.lsh_attention,
    rng=jax.random.PRNGKey(7),
    n_hashes=n_hashes,
    chunk_len=LENGTH,
    n_buckets=2,
    n_chunks_before=0,
    causal=causal,
  )
  dense_fn = functools.partial(lsh.dense_shared_qk_attention, causal=causal)
  _assert_same(
    _outputs_and_grads(lsh_fn, qk, value, segment_ids, cotangent),
    _outputs_and_grads(dense_fn, qk, value, segment_ids, cotangent),
    valid,
  )


def test_one_chunk_layer_equals_dense_layer_with_weight_gradients():
  """The lsh layer with one chunk vs its projections around dense shared-QK attention."""
  config = ModelConfig(
    vocab_size=8,
    hidden_size=16,
    num_heads=HEADS,
    intermediate_size=32,
    num_layers=1,
    max_position_embeddings=LENGTH,
    hidden_dropout_rate=0.0,
    attention_dropout_rate=0.0,
    attention_kind="lsh",
    lsh=LshOptions(chunk_len=LENGTH, n_hashes=2, n_buckets=2, n_chunks_before=0),
  )
  x_BLE = jax.random.normal(jax.random.PRNGKey(9), (BATCH, LENGTH, 16))
  _, _, segment_ids, valid, cotangent_BLHD = _inputs(seed=9)
  cotangent_BLE = cotangent_BLHD.reshape(BATCH, LENGTH, -1)  # Zero at padding queries.
  layer = SelfAttention(config)
  rngs = {"params": jax.random.PRNGKey(10), "hashing": jax.random.PRNGKey(11)}
  # Random biases too (init zeroes them), drawn from the shapes alone: no init to compile.
  shapes = flax.linen.unbox(jax.eval_shape(layer.init, rngs, x_BLE, segment_ids)["params"])
  leaves, treedef = jax.tree.flatten(shapes)
  keys = jax.random.split(jax.random.PRNGKey(10), len(leaves))
  params = treedef.unflatten(
    [0.3 * jax.random.normal(key, leaf.shape) for key, leaf in zip(keys, leaves)]
  )

  def lsh_layer(params, x_BLE):
    return layer.apply(
      {"params": params}, x_BLE, segment_ids, rngs={"hashing": jax.random.PRNGKey(12)}
    )

  def dense_layer(params, x_BLE):
    def project(name):
      return (
        jnp.einsum("ble,ehd->blhd", x_BLE, params[name]["kernel"])
        + params[name]["bias"][None, None]
      )

    out_BLHD = lsh.dense_shared_qk_attention(project("query"), project("value"), segment_ids)
    return (
      jnp.einsum("blhd,hde->ble", out_BLHD, params["output"]["kernel"])
      + params["output"]["bias"][None, None]
    )

  def outputs_and_grads(fn):
    out_BLE, vjp = jax.vjp(fn, params, x_BLE)
    return out_BLE, vjp(cotangent_BLE)

  (out_a, (dparams_a, dx_a)), (out_b, (dparams_b, dx_b)) = (
    jax.jit(outputs_and_grads, static_argnums=0)(lsh_layer),
    jax.jit(outputs_and_grads, static_argnums=0)(dense_layer),
  )
  np.testing.assert_allclose(out_a * valid[..., 0], out_b * valid[..., 0], atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(dx_a, dx_b, atol=1e-5, rtol=1e-5)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5), dparams_a, dparams_b
  )
  assert float(jnp.max(jnp.abs(dparams_a["query"]["kernel"]))) > 1e-3  # Gradients flow.


@pytest.mark.parametrize(
  "settings",
  [
    dict(n_hashes=1, chunk_len=8),
    dict(n_hashes=2, chunk_len=8, n_buckets=4, n_chunks_after=1),
    dict(n_hashes=4, chunk_len=16, causal=True),
    dict(n_hashes=3, chunk_len=8, mask_across_buckets=True, causal=True),
    # Window (3 chunks) longer than the 2-chunk sorted sequence: chunks repeat in a window.
    dict(n_hashes=1, chunk_len=32, n_chunks_before=2),
    # Windows spanning several rounds: duplicates come from non-adjacent rounds too.
    dict(n_hashes=4, chunk_len=32, n_chunks_before=3, n_chunks_after=1),
    dict(n_hashes=4, chunk_len=4, n_chunks_before=5, dedup_correction=False),
    # Factorised hashing: 4 x 2 buckets from 2 + 1 rotations.
    dict(n_hashes=2, chunk_len=8, n_buckets=(4, 2), mask_across_buckets=True),
  ],
  ids=lambda settings: "-".join(f"{k}={v}" for k, v in settings.items()),
)
def test_matches_reference(settings):
  qk, value, segment_ids, valid, cotangent = _inputs(seed=1)
  kwargs = dict(rng=jax.random.PRNGKey(3), **settings)
  fast = _outputs_and_grads(
    functools.partial(lsh.lsh_attention, **kwargs), qk, value, segment_ids, cotangent
  )
  slow = _outputs_and_grads(
    functools.partial(lsh.lsh_attention_reference, **kwargs), qk, value, segment_ids, cotangent
  )
  _assert_same(fast, slow, valid)


@pytest.mark.parametrize(
  "settings",
  [
    dict(n_hashes=2, chunk_len=8),
    dict(
      n_hashes=3,
      chunk_len=8,
      n_chunks_before=2,
      n_chunks_after=1,
      causal=True,
      mask_across_buckets=True,
    ),
  ],
  ids=lambda settings: "-".join(f"{k}={v}" for k, v in settings.items()),
)
def test_blocked_loop_matches_reference(monkeypatch, settings):
  """Small loop steps (one or two chunks): windows and gradients cross step boundaries."""
  # Two chunks of 8 x 8 logits per (batch, head) and window chunk per step.
  monkeypatch.setattr(lsh_chunks, "_BLOCK_VALUES", 2 * BATCH * HEADS * 8 * 8)
  spec = lsh_chunks.ChunkSpec(
    8, settings.get("n_chunks_before", 1), settings.get("n_chunks_after", 0), False, False, 0.0, ()
  )
  n_chunks = settings["n_hashes"] * LENGTH // 8
  assert lsh_chunks._chunks_per_step(n_chunks, BATCH * HEADS, spec) <= 2
  qk, value, segment_ids, valid, cotangent = _inputs(seed=7)
  kwargs = dict(rng=jax.random.PRNGKey(4), **settings)
  fast = _outputs_and_grads(
    functools.partial(lsh.lsh_attention, **kwargs), qk, value, segment_ids, cotangent
  )
  slow = _outputs_and_grads(
    functools.partial(lsh.lsh_attention_reference, **kwargs), qk, value, segment_ids, cotangent
  )
  _assert_same(fast, slow, valid)


def test_default_buckets_are_factorised_above_256():
  """n_buckets=None keeps the count 2 L / chunk_len and splits it into two even factors > 256."""
  assert lsh_hashing.bucket_factors(None, 4096, 64) == (128,)
  assert lsh_hashing.bucket_factors(None, 8192, 64) == (256,)
  assert lsh_hashing.bucket_factors(None, 16384, 64) == (16, 32)
  assert lsh_hashing.bucket_factors(None, 65536, 64) == (32, 64)
  assert lsh_hashing.bucket_factors(None, 129 * 64, 32) == (6, 86)  # 516 = 4 * 3 * 43.
  assert lsh_hashing.bucket_factors(None, 131 * 32, 32) == (262,)  # 2 * odd: no even split.
  assert lsh_hashing.bucket_factors(512, 16384, 64) == (512,)  # An explicit int: one rotation.
  assert lsh_hashing.bucket_factors([8, 4], 64, 8) == (8, 4)
  # End to end: 1024 tokens in chunks of 4 default to 512 buckets hashed as 16 x 32.
  qk, value, _, _, _ = _inputs(seed=8, length=1024)
  segment_ids = jnp.ones((BATCH, 1024), jnp.int32)
  attend = jax.jit(
    functools.partial(lsh.lsh_attention, rng=jax.random.PRNGKey(1), n_hashes=1, chunk_len=4),
    static_argnames="n_buckets",
  )
  default = attend(qk, value, segment_ids, n_buckets=None)
  np.testing.assert_array_equal(default, attend(qk, value, segment_ids, n_buckets=(16, 32)))
  assert float(jnp.max(jnp.abs(default - attend(qk, value, segment_ids, n_buckets=512)))) > 1e-3


def test_bucket_config_accepts_an_int_or_factors():
  assert LshOptions(n_buckets=[16, 32]).n_buckets == (16, 32)  # Lists (e.g. from JSON) too.
  assert LshOptions(n_buckets=64).n_buckets == 64
  for bad in (7, -2, (4, 3), (), (16, 2.0)):
    with pytest.raises(UserInputError, match="n_buckets=.* must be even") as error:
      LshOptions(n_buckets=bad)
    assert "\n" not in str(error.value)
  with pytest.raises(UserInputError, match="n_hashes=0 must be >= 1"):
    LshOptions(n_hashes=0)


def test_dedup_correction_matters():
  """Without the correction keys seen in several rounds are over-weighted: results differ."""
  qk, value, segment_ids, valid, _ = _inputs(seed=2)
  attend = jax.jit(
    functools.partial(lsh.lsh_attention, rng=jax.random.PRNGKey(0), n_hashes=4, chunk_len=8),
    static_argnames="dedup_correction",
  )
  with_dedup = attend(qk, value, segment_ids, dedup_correction=True)
  without = attend(qk, value, segment_ids, dedup_correction=False)
  assert float(jnp.max(jnp.abs((with_dedup - without) * valid))) > 1e-2


def _clustered_inputs(seed, length=256, n_clusters=8, head_dim=16):
  """Keys near a few random directions, so LSH buckets follow the clusters."""
  key_centres, key_assign, key_noise, key_value = jax.random.split(jax.random.PRNGKey(seed), 4)
  centres_HCD = jax.random.normal(key_centres, (HEADS, n_clusters, head_dim))
  centres_HCD /= jnp.linalg.norm(centres_HCD, axis=-1, keepdims=True)
  cluster_1LH = jax.random.randint(key_assign, (1, length, HEADS), 0, n_clusters)
  qk_1LHD = centres_HCD[jnp.arange(HEADS)[None, None, :], cluster_1LH]
  qk_1LHD = 12.0 * (qk_1LHD + 0.1 * jax.random.normal(key_noise, qk_1LHD.shape))
  value_1LHD = jax.random.normal(key_value, qk_1LHD.shape)
  return qk_1LHD, value_1LHD, jnp.ones((1, length), jnp.int32)


def test_error_against_dense_falls_with_more_hashes():
  attend = jax.jit(
    lambda qk, value, segment_ids, rng, n_hashes: lsh.lsh_attention(
      qk, value, segment_ids, rng=rng, n_hashes=n_hashes, chunk_len=16
    ),
    static_argnums=4,
  )
  hash_counts = (1, 2, 4, 8)
  errors = np.zeros(len(hash_counts))
  for seed in range(3):
    qk, value, segment_ids = _clustered_inputs(seed)
    dense = lsh.dense_shared_qk_attention(qk, value, segment_ids)
    for i, n_hashes in enumerate(hash_counts):
      out = attend(qk, value, segment_ids, jax.random.PRNGKey(100 + seed), n_hashes)
      errors[i] += float(jnp.mean(jnp.abs(out - dense))) / 3
  assert np.all(np.diff(errors) < 0), errors
  assert errors[-1] < 0.3 * errors[0], errors


def test_hashing_in_blocks_gives_the_same_buckets(monkeypatch):
  """Long sequences hash a block of positions at a time; blocks must not change the buckets."""
  qk, _, _, _, _ = _inputs(seed=5)

  # A fresh function per setting: jax caches traces by function, not by module globals.
  def hash_fn():
    return functools.partial(lsh.hash_buckets, rng=jax.random.PRNGKey(1), n_hashes=3, n_buckets=16)

  whole = jax.jit(hash_fn())(qk)
  # 384 rotated values per head = 8 positions x 2 sequences x 3 rounds x 8 rotations.
  monkeypatch.setattr(lsh_hashing, "_HASH_BLOCK_VALUES", 384)
  assert "scan" in str(jax.make_jaxpr(hash_fn())(qk))
  np.testing.assert_array_equal(jax.jit(hash_fn())(qk), whole)
  assert whole.shape == (BATCH, HEADS, 3, LENGTH)
  # Round r's buckets are offset by r * n_buckets, so rounds never share a bucket.
  np.testing.assert_array_equal(
    np.asarray(whole) // 16, np.arange(3)[None, None, :, None] + np.zeros_like(whole)
  )


def test_factorised_buckets_are_mixed_radix_digits():
  """n_buckets=(a, b): bucket = d_a + a * d_b, digits from the rotations' argmaxes in order."""
  qk, _, _, _, _ = _inputs(seed=6)
  rng = jax.random.PRNGKey(2)
  single = lsh.hash_buckets(qk, rng, n_hashes=2, n_buckets=8)
  np.testing.assert_array_equal(lsh.hash_buckets(qk, rng, n_hashes=2, n_buckets=(8,)), single)
  factorised = np.asarray(lsh.hash_buckets(qk, rng, n_hashes=2, n_buckets=(4, 6)))
  round_N = np.arange(2)[None, None, :, None]
  np.testing.assert_array_equal(factorised // 24, round_N + np.zeros_like(factorised))
  # The same rotations, applied densely: 2 + 3 columns per head and round.
  rotations_HNDR = jax.random.normal(rng, (HEADS * 2 * HEAD_DIM * 5,)).reshape(
    HEADS, 2, HEAD_DIM, 5
  )
  rotated_BHNLR = np.asarray(jnp.einsum("blhd,hndr->bhnlr", qk, rotations_HNDR))
  digit_a = np.argmax(np.concatenate([rotated_BHNLR[..., :2], -rotated_BHNLR[..., :2]], -1), -1)
  digit_b = np.argmax(np.concatenate([rotated_BHNLR[..., 2:], -rotated_BHNLR[..., 2:]], -1), -1)
  np.testing.assert_array_equal(factorised % 24, digit_a + 4 * digit_b)
  assert len(np.unique(factorised)) > 24  # both digits vary


def test_same_rng_same_output_different_rng_different_output():
  qk, value, segment_ids, _, _ = _inputs(seed=3)
  attend = jax.jit(
    lambda rng: lsh.lsh_attention(qk, value, segment_ids, rng=rng, n_hashes=2, chunk_len=8)
  )
  first = attend(jax.random.PRNGKey(5))
  np.testing.assert_array_equal(first, attend(jax.random.PRNGKey(5)))
  assert float(jnp.max(jnp.abs(first - attend(jax.random.PRNGKey(6))))) > 1e-2


def test_bfloat16_is_finite_and_close_to_float32():
  qk, value, segment_ids, valid, _ = _inputs(seed=4, dtype=jnp.bfloat16)
  attend = jax.jit(
    functools.partial(
      lsh.lsh_attention, rng=jax.random.PRNGKey(0), n_hashes=2, chunk_len=8, causal=True
    )
  )
  out_bf16 = attend(qk, value, segment_ids)
  # Same (bf16-representable) inputs in float32, so both runs hash identically.
  out_f32 = attend(qk.astype(jnp.float32), value.astype(jnp.float32), segment_ids)
  assert out_bf16.dtype == jnp.bfloat16
  assert bool(jnp.all(jnp.isfinite(out_bf16)))  # padding queries included
  # bf16 keeps 8 mantissa bits (relative step 2^-8 ~ 0.4%); |values| are O(1) here, so a few
  # roundings of keys, probabilities and output stay well inside 5e-2.
  np.testing.assert_allclose(
    np.asarray(out_bf16, np.float32) * valid, out_f32 * valid, atol=5e-2, rtol=0
  )


@pytest.mark.parametrize(
  "kwargs,message",
  [
    (dict(n_hashes=1, chunk_len=24), "pad the sequence to a multiple of chunk_len"),
    (dict(n_hashes=1, chunk_len=8, n_buckets=5), "n_buckets must be even"),
    (dict(n_hashes=0, chunk_len=8), "n_hashes must be >= 1"),
    (dict(n_hashes=1, chunk_len=8, n_buckets=(4, 3)), "n_buckets must be even"),
  ],
)
def test_bad_arguments_raise(kwargs, message):
  qk, value, segment_ids, _, _ = _inputs()
  with pytest.raises(ValueError, match=message):
    lsh.lsh_attention(qk, value, segment_ids, rng=jax.random.PRNGKey(0), **kwargs)


def _avals(jaxpr):
  """Every intermediate abstract value in a jaxpr, sub-jaxprs (custom_vjp, remat, ...) included."""
  for eqn in jaxpr.eqns:
    for var in eqn.outvars:
      yield var.aval
  for sub in jex_core.subjaxprs(jaxpr):
    yield from _avals(sub)


def _intermediate_sizes(fn, length):
  """Largest intermediate of fn's forward+backward jaxpr, and whether any has two dims >= L."""
  qk = jnp.zeros((1, length, 1, 4))
  segment_ids = jnp.ones((1, length), jnp.int32)

  def loss(qk, value):
    return jnp.sum(fn(qk, value, segment_ids))

  jaxpr = jax.make_jaxpr(jax.grad(loss, argnums=(0, 1)))(qk, qk).jaxpr
  shapes = [aval.shape for aval in _avals(jaxpr) if hasattr(aval, "shape")]
  has_square = any(sum(dim >= length for dim in shape) >= 2 for shape in shapes)
  return max(int(np.prod(shape)) for shape in shapes), has_square


def test_memory_is_linear_in_length():
  """No L x L intermediate, and the largest one (hashing included) doubles when L doubles."""
  kwargs = dict(rng=jax.random.PRNGKey(0), n_hashes=2, chunk_len=16)
  largest = {}
  for length in (1024, 2048):
    largest[length], has_square = _intermediate_sizes(
      functools.partial(lsh.lsh_attention, **kwargs), length
    )
    assert not has_square
  assert largest[2048] <= 2 * largest[1024]
  # The detector does see the reference's dense L x L matrices.
  _, reference_has_square = _intermediate_sizes(
    functools.partial(lsh.lsh_attention_reference, **kwargs), 1024
  )
  assert reference_has_square
