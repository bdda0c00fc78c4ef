"""Flash attention (Pallas, Triton backend) equals dense attention, with and without its
in-kernel dropout, in Pallas interpret mode on CPU; and its fwd+bwd lowers to Triton kernels.

Lowering for CUDA works on a CPU-only jax; compiling the Triton kernels needs a GPU. On a GPU
host (``JAX_PLATFORMS=cuda,cpu python -m pytest tests/test_flash_attention.py``, which
``launch/gpu_benchmark.sh --gpu_tests`` runs) the same tests run the compiled kernels.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.errors import UserInputError
from bert_jax.models.attention import dense, flash, flash_dropout, flash_launch
from bert_jax.models.config import ModelConfig
from bert_jax.models.families import model_config_from_dict
from bert_jax.parallel import mesh as mesh_lib
from bert_jax.parallel.mesh import DEFAULT_LOGICAL_AXIS_RULES
from bert_jax.tasks.pretraining import PretrainingTask
from bert_jax.train import setup
from tests import helpers

# Blocks of 16 over 64 positions: four query and four key blocks, documents ending inside them.
BATCH, LENGTH, HEADS, HEAD_DIM, BLOCK = 4, 64, 2, 16, 16
RATE = 0.1


def _segment_ids():
  ids = np.zeros((BATCH, LENGTH), np.int32)
  ids[0, :40] = 1  # One document, then padding.
  ids[1, :20], ids[1, 20:50] = 1, 2  # Two packed documents (one ends inside a block), padding.
  ids[3, :] = 3  # No padding. Row 2 is all padding (a batch's filler).
  return jnp.asarray(ids)


def _real_BL11(segment_ids_BL):
  return (segment_ids_BL != 0)[:, :, None, None]


def _inputs(dtype=jnp.float32, seed=0):
  """Queries, keys, values and the output's cotangent (on every position, padding included)."""
  keys = jax.random.split(jax.random.key(seed), 4)
  shape = (BATCH, LENGTH, HEADS, HEAD_DIM)
  qkv = tuple(2 * jax.random.normal(k, shape).astype(dtype) for k in keys[:3])
  return qkv, jax.random.normal(keys[3], shape)


@functools.partial(jax.jit, static_argnames="rate")
def _flash_out_and_grads(query, key, value, segment_ids_BL, d_out, rng, rate):
  def attend(*qkv):
    return flash.flash_attention(
      *qkv, segment_ids_BL, dropout_rate=rate, dropout_rng=rng if rate else None, block=BLOCK
    )

  out, vjp = jax.vjp(attend, query, key, value)
  return out, vjp(d_out.astype(out.dtype))


@functools.partial(jax.jit, static_argnames="rate")
def _reference_out_and_grads(query, key, value, segment_ids_BL, d_out, rng, rate):
  """Dense attention (f32) with flash's dropout mask, zero at padding queries, and autodiff."""

  def attend(q, k, v):
    if rate == 0:
      out = dense.dense_attention(q, k, v, segment_ids_BL)
    else:
      _, probs_BHQK = dense.dense_attention(q, k, v, segment_ids_BL, return_probs=True)
      keep_BHQK = flash_dropout.keep_mask_BHQK(rng, probs_BHQK.shape, rate)
      kept_BHQK = jnp.where(keep_BHQK, probs_BHQK / (1 - rate), 0.0)
      out = jnp.einsum("bhqk,bkhd->bqhd", kept_BHQK, v)
    return jnp.where(_real_BL11(segment_ids_BL), out, 0.0)

  # Full float32 products: a GPU would otherwise use TF32 for the reference.
  with jax.default_matmul_precision("highest"):
    out, vjp = jax.vjp(attend, *(x.astype(jnp.float32) for x in (query, key, value)))
    return out, vjp(d_out)


def _max_error(got, want):
  return float(np.max(np.abs(np.asarray(got, np.float32) - np.asarray(want, np.float32))))


@pytest.mark.parametrize("rate", [0.0, RATE])
def test_outputs_and_gradients_match_dense_with_the_same_mask(rate):
  """With the cotangent on every position: padding queries (zero output) pass no gradient."""
  qkv, d_out = _inputs()
  segment_ids_BL, rng = _segment_ids(), jax.random.key(1)
  out, grads = _flash_out_and_grads(*qkv, segment_ids_BL, d_out, rng, rate)
  want_out, want_grads = _reference_out_and_grads(*qkv, segment_ids_BL, d_out, rng, rate)
  errors = [_max_error(out, want_out)] + [_max_error(g, w) for g, w in zip(grads, want_grads)]
  print(f"rate {rate}: max abs error out, dq, dk, dv = {errors}")
  assert max(errors) < 1e-5, errors
  assert not np.any(np.asarray(jnp.where(_real_BL11(segment_ids_BL), 0.0, out)))
  if rate == 0:  # Against dense itself at real tokens.
    real = np.broadcast_to(np.asarray(_real_BL11(segment_ids_BL)), out.shape)
    with jax.default_matmul_precision("highest"):
      dense_out = np.asarray(dense.dense_attention(*qkv, segment_ids_BL))
    np.testing.assert_allclose(np.asarray(out)[real], dense_out[real], atol=1e-5)


@functools.partial(jax.jit, static_argnames="rate")
def _packed_out_and_grads(kvq_BLNHD, bias_NHD, segment_ids_BL, d_out, rng, rate):
  def attend(packed, bias):
    return flash.flash_attention_packed(
      packed, segment_ids_BL, bias_NHD=bias, dropout_rate=rate, dropout_rng=rng, block=BLOCK
    )

  out, vjp = jax.vjp(attend, kvq_BLNHD, bias_NHD)
  return out, vjp(d_out.astype(out.dtype))


def test_packed_operands_give_the_same_outputs_and_gradients():
  """flash_attention_packed reads k, v, q in place from [B, L, 3, H, D], adds their bias as it
  reads them, and writes their gradient packed the same way (the dK/dV kernel two slots, the dQ
  kernel the third of the same buffer) and the bias's summed over batch and length: the same
  kernels and mask as on three biased arrays; under a mesh (8 devices) too."""
  (query, key, value), d_out = _inputs(seed=4)
  bias_NHD = jax.random.normal(jax.random.key(6), (3, HEADS, HEAD_DIM))  # Key, value, query.
  segment_ids_BL, rng = _segment_ids(), jax.random.key(5)
  biased = [x + bias_NHD[slot][None, None] for x, slot in zip((query, key, value), (2, 0, 1))]
  want_out, (dq, dk, dv) = _flash_out_and_grads(*biased, segment_ids_BL, d_out, rng, RATE)
  want_packed = jnp.stack((dk, dv, dq), axis=2)
  want_bias = jnp.sum(want_packed, axis=(0, 1))
  packed = jnp.stack((key, value, query), axis=2)
  runs = [_packed_out_and_grads(packed, bias_NHD, segment_ids_BL, d_out, rng, RATE)]
  if jax.device_count() >= 8:
    mesh = mesh_lib.make_mesh(mesh_lib.MeshConfig(data=2, fsdp=2, tensor=2))
    with setup.mesh_context(mesh, DEFAULT_LOGICAL_AXIS_RULES):
      runs.append(_packed_out_and_grads(packed, bias_NHD, segment_ids_BL, d_out, rng, RATE))
  for out, (d_packed, d_bias) in runs:
    assert d_packed.shape == packed.shape and d_bias.shape == bias_NHD.shape
    # XLA may order the sums around the kernels (delta, the bias's) differently.
    errors = [_max_error(g, w) for g, w in ((out, want_out), (d_packed, want_packed))]
    assert max(errors) < 1e-5 and _max_error(d_bias, want_bias) < 1e-4, errors
  with pytest.raises(ValueError, match=r"must be \[B, L, 3, H, D\]"):
    flash.flash_attention_packed(jnp.zeros((1, 32, 2, 1, 16)), jnp.ones((1, 32), jnp.int32))


def test_another_launch_gives_the_same_attention():
  """Blocks of 32 forward and 16 backward (and other warps, which interpret mode ignores):
  the same outputs and gradients up to float32 summation order."""
  qkv, d_out = _inputs(seed=7)
  segment_ids_BL, rng = _segment_ids(), jax.random.key(8)
  want = _flash_out_and_grads(*qkv, segment_ids_BL, d_out, rng, RATE)

  @jax.jit
  def with_launch(query, key, value):
    def attend(*qkv):
      return flash.flash_attention(
        *qkv, segment_ids_BL, dropout_rate=RATE, dropout_rng=rng,
        launch=flash_launch.TritonLaunch(32, 2, 16, 8, 3),
      )  # fmt: skip

    out, vjp = jax.vjp(attend, query, key, value)
    return out, vjp(d_out)

  got = with_launch(*qkv)
  errors = [_max_error(g, w) for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want))]
  assert max(errors) < 3e-5, errors  # Gradients of order 10: float32 rounding.


def test_the_backward_drops_what_the_forward_dropped():
  """out is linear in value through the dropped probabilities: <out, d_out> = <value, d_value>
  for one mask; a backward drawing another mask breaks it."""
  (query, key, value), d_out = _inputs(seed=2)
  segment_ids_BL = _segment_ids()
  out, (_, _, d_value) = _flash_out_and_grads(
    query, key, value, segment_ids_BL, d_out, jax.random.key(3), RATE
  )
  real = _real_BL11(segment_ids_BL)
  lhs = float(jnp.sum(jnp.where(real, out * d_out, 0.0)))
  rhs = float(jnp.sum(value * d_value))
  print(f"<out, d_out> = {lhs}, <value, d_value> = {rhs}")
  np.testing.assert_allclose(lhs, rhs, rtol=1e-4)  # Another mask: off by ~10%.


def test_dropout_mask_statistics_and_determinism():
  shape = (4, 12, 128, 128)
  keep = np.asarray(flash_dropout.keep_mask_BHQK(jax.random.key(0), shape, RATE))
  n = keep.size
  sigma = (RATE * (1 - RATE) / n) ** 0.5
  assert abs(keep.mean() - (1 - RATE)) < 4 * sigma, keep.mean()
  # Neighbouring heads, sequences, rows and columns agree as independent masks would.
  independent = (1 - RATE) ** 2 + RATE**2
  for a, b in [
    (keep[:, 1:], keep[:, :-1]),
    (keep[1:], keep[:-1]),
    (keep[:, :, 1:], keep[:, :, :-1]),
    (keep[..., 1:], keep[..., :-1]),
  ]:
    assert (
      abs((a == b).mean() - independent) < 4 * (independent * (1 - independent) / a.size) ** 0.5
    )
  other = np.asarray(flash_dropout.keep_mask_BHQK(jax.random.key(1), shape, RATE))
  assert abs((keep != other).mean() - 2 * RATE * (1 - RATE)) < 0.01
  # The kernel: one rng gives one output, another rng another.
  qkv, d_out = _inputs()
  segment_ids_BL = _segment_ids()
  outs = [
    np.asarray(_flash_out_and_grads(*qkv, segment_ids_BL, d_out, jax.random.key(s), RATE)[0])
    for s in (5, 5, 6)
  ]
  np.testing.assert_array_equal(outs[0], outs[1])
  assert np.mean(np.abs(outs[0] - outs[2]) > 1e-3) > 0.3


def test_bfloat16_matches_float32():
  qkv, d_out = _inputs(jnp.bfloat16)
  segment_ids_BL, rng = _segment_ids(), jax.random.key(1)
  out, grads = _flash_out_and_grads(*qkv, segment_ids_BL, d_out, rng, RATE)
  want_out, want_grads = _reference_out_and_grads(*qkv, segment_ids_BL, d_out, rng, RATE)
  assert out.dtype == jnp.bfloat16 and all(g.dtype == jnp.bfloat16 for g in grads)
  for got, want in zip((out, *grads), (want_out, *want_grads)):
    scale = float(jnp.max(jnp.abs(want)))
    assert _max_error(got, want) < 2e-2 * scale, (_max_error(got, want), scale)


def test_padding_does_not_reach_real_tokens():
  qkv, d_out = _inputs()
  segment_ids_BL, rng = _segment_ids(), jax.random.key(1)
  pad = ~_real_BL11(segment_ids_BL)
  noise, _ = _inputs(seed=9)
  noisy = [jnp.where(pad, 1e3 * n, x) for n, x in zip(noise, qkv)]
  out, grads = _flash_out_and_grads(*qkv, segment_ids_BL, d_out, rng, RATE)
  noisy_out, noisy_grads = _flash_out_and_grads(*noisy, segment_ids_BL, d_out, rng, RATE)
  real = np.broadcast_to(np.asarray(~pad), out.shape)
  for got, want in zip((noisy_out, *noisy_grads), (out, *grads)):
    np.testing.assert_array_equal(np.asarray(got)[real], np.asarray(want)[real])
    assert np.all(np.isfinite(np.asarray(got)))


def test_forward_and_backward_lower_to_triton_kernels_without_an_lxl_array():
  """BERT-base's per-layer shapes (bf16, dropout 0.1), lowered for CUDA from this CPU host."""
  batch, length, heads, head_dim = 2, 128, 12, 64
  qkv = [jax.ShapeDtypeStruct((batch, length, heads, head_dim), jnp.bfloat16)] * 3
  segment_ids = jax.ShapeDtypeStruct((batch, length), jnp.int32)

  def loss(query, key, value, segment_ids_BL, rng):
    out = flash.flash_attention(
      query, key, value, segment_ids_BL, dropout_rate=RATE, dropout_rng=rng, interpret=False
    )
    return jnp.sum(out.astype(jnp.float32))

  lowered = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).trace(*qkv, segment_ids, jax.random.key(0))
  text = lowered.lower(lowering_platforms=("cuda",)).as_text()
  # The forward, the dK/dV and the dQ kernel.
  assert text.count("stablehlo.custom_call @__gpu$xla.gpu.triton") == 3, text[:3000]
  assert f"tensor<{batch}x{heads}x{length}x{length}x" not in text

  def packed_loss(qkv_BLNHD, bias_NHD, segment_ids_BL, rng):
    out = flash.flash_attention_packed(
      qkv_BLNHD,
      segment_ids_BL,
      bias_NHD=bias_NHD,
      dropout_rate=RATE,
      dropout_rng=rng,
      interpret=False,
    )
    return jnp.sum(out.astype(jnp.float32))

  packed_shape = f"tensor<{batch}x{length}x3x{heads}x{head_dim}x"
  packed = jax.ShapeDtypeStruct((batch, length, 3, heads, head_dim), jnp.bfloat16)
  bias = jax.ShapeDtypeStruct((3, heads, head_dim), jnp.float32)
  lowered = jax.jit(jax.grad(packed_loss, argnums=(0, 1))).trace(
    packed, bias, segment_ids, jax.random.key(0)
  )
  text = lowered.lower(lowering_platforms=("cuda",)).as_text()
  lines = text.splitlines()
  calls = [line for line in lines if "@__gpu$xla.gpu.triton" in line]
  # The three kernels take the packed array itself: nothing is sliced out of it for them, and
  # their gradients are not packed after them (the kernels write one buffer).
  assert len(calls) == 3 and "stablehlo.slice %arg0" not in text, text[:3000]
  assert "stablehlo.pad" not in text and "stablehlo.concatenate" not in text, text[:3000]
  assert all(f"{packed_shape}bf16>" in call for call in calls)
  # The bias's gradient is summed from the kernels' per-block row sums [blocks, B, 3, H, D]:
  # nothing reads the packed gradient back to sum it.
  sums = [line for line in lines if "stablehlo.reduce" in line and "3x12x64xf32>" in line]
  assert len(sums) == 1 and packed_shape not in sums[0], sums


def test_bad_input_is_refused():
  with pytest.raises(
    UserInputError, match="multiple of 16, got 40; use e.g. data.max_seq_length=48"
  ):
    flash.flash_attention(*[jnp.zeros((1, 40, 1, 16))] * 3, jnp.ones((1, 40), jnp.int32))
  with pytest.raises(UserInputError, match="head_dim 16, 32, 64, 128, 256, got head_dim=24"):
    flash.flash_attention(*[jnp.zeros((1, 32, 1, 24))] * 3, jnp.ones((1, 32), jnp.int32))
  zeros = [jnp.zeros((1, 64, 1, 16))] * 3
  with pytest.raises(ValueError, match="block 24 must be a power of two >= 16 that divides"):
    flash.flash_attention(
      *zeros, jnp.ones((1, 64), jnp.int32), launch=flash_launch.TritonLaunch(24, 4, 16, 4)
    )
  with pytest.raises(ValueError, match="takes block or launch, not both"):
    flash.flash_attention(
      *zeros, jnp.ones((1, 64), jnp.int32), block=16, launch=flash_launch.TritonLaunch(16, 4, 16, 4)
    )
  assert str(flash_launch.TritonLaunch.parse("128/8/64/4/2")) == "128/8/64/4/2"
  assert flash_launch.default_launch(128, 64) == flash_launch.TritonLaunch(128, 8, 64, 4, 2)
  with pytest.raises(UserInputError, match="write FORWARD_BLOCK/FORWARD_WARPS/BACKWARD_BLOCK/"):
    flash_launch.TritonLaunch.parse("128/8/64/x/2")
  with pytest.raises(UserInputError, match="got head_dim=24; change model.num_heads or use"):
    ModelConfig(attention_kind="flash", hidden_size=96, num_heads=4)
  # Unlike the other fused kinds, flash has attention dropout, in float32 or bf16.
  ModelConfig(attention_kind="flash", attention_dropout_rate=0.1, dtype="bfloat16")
  ModelConfig(attention_kind="flash", attention_dropout_rate=0.1)


def _tiny_bert(kind):
  config = model_config_from_dict({"size": "tiny", "vocab_size": 128, "attention_kind": kind})
  task = PretrainingTask(config, 64, 8)
  return task, task.model_inputs(task.random_batch(2))


def test_tiny_bert_gives_the_dense_logits_and_finite_dropout_gradients():
  logits = {}
  for kind in ("dense", "flash"):
    task, inputs = _tiny_bert(kind)
    model = task.model(deterministic=True)
    variables = jax.jit(model.init)(jax.random.key(0), *inputs)
    with jax.default_matmul_precision("highest"):  # No TF32 on a GPU.
      logits[kind] = jax.jit(model.apply)(variables, *inputs)["mlm_logits"]
  error = _max_error(logits["flash"], logits["dense"])
  print(f"tiny BERT mlm logits, flash vs dense: max abs error {error}")
  assert error < 1e-5
  training = task.model(deterministic=False)  # Attention dropout 0.1 (BERT's default).

  def loss(v):
    out = training.apply(v, *inputs, rngs={"dropout": jax.random.key(3)})
    return jnp.sum(out["mlm_logits"])

  grads = jax.jit(jax.grad(loss))(variables)
  assert all(np.all(np.isfinite(np.asarray(g))) for g in jax.tree.leaves(grads))


@pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 devices (CPU: conftest's fake ones)")
def test_sharded_equals_unsharded():
  """data 2 x fsdp 2 x tensor 2: batch split 4 ways, heads 2 ways; the dropout mask is one."""
  qkv, d_out = _inputs()
  segment_ids_BL, rng = _segment_ids(), jax.random.key(1)
  want_out, want_grads = _flash_out_and_grads(*qkv, segment_ids_BL, d_out, rng, RATE)
  mesh = mesh_lib.make_mesh(mesh_lib.MeshConfig(data=2, fsdp=2, tensor=2))
  with setup.mesh_context(mesh, DEFAULT_LOGICAL_AXIS_RULES):
    out, grads = _flash_out_and_grads(*qkv, segment_ids_BL, d_out, rng, RATE)
    jaxpr = _flash_out_and_grads.trace(*qkv, segment_ids_BL, d_out, rng, RATE).jaxpr
  assert "shard_map" in str(jaxpr)
  errors = [_max_error(g, w) for g, w in zip((out, *grads), (want_out, *want_grads))]
  print(f"sharded vs unsharded: max abs error out, dq, dk, dv = {errors}")
  # Same kernels and mask per element; only XLA's reductions around them may reorder sums.
  assert max(errors) < 1e-5, errors


@pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 devices (CPU: conftest's fake ones)")
def test_a_train_step_with_flash_dropout_is_the_same_on_1_and_8_devices():
  """The whole train step, attention dropout 0.1 inside the kernels: one device equals data 2 x
  tensor 4 (heads split 4 ways, the batch 2 ways), and the flash kernels are what ran (the dense
  kernel's dropout draws another mask, so its loss differs)."""

  def step(kind, devices, **axes):
    config = helpers.small_config(**{"model.attention_kind": kind, **axes})
    assert config.model.attention_dropout_rate > 0
    return helpers.one_train_step(config, devices)

  _, params_1, metrics_1, _ = step("flash", jax.devices()[:1], **{"mesh.data": 1})
  _, params_8, metrics_8, _ = step("flash", jax.devices(), **{"mesh.data": 2, "mesh.tensor": 4})
  for key in ("mlm_loss", "nsp_loss", "mlm_accuracy", "grad_norm"):
    np.testing.assert_allclose(metrics_8[key], metrics_1[key], rtol=2e-5, err_msg=key)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-4), params_8, params_1
  )
  _, _, dense_metrics, _ = step("dense", jax.devices()[:1], **{"mesh.data": 1})
  assert abs(dense_metrics["mlm_loss"] - metrics_1["mlm_loss"]) > 1e-4
