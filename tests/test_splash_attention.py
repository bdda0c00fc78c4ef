"""Splash attention equals dense attention (Pallas interpret mode on CPU) and compiles for TPU."""

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from bert_jax.errors import UserInputError
from bert_jax.models.attention import dense, splash
from bert_jax.models.attention.layer import SelfAttention
from bert_jax.models.config import ModelConfig
from bert_jax.parallel import mesh as mesh_lib
from bert_jax.parallel import topologies
from bert_jax.parallel.mesh import DEFAULT_LOGICAL_AXIS_RULES
from bert_jax.train import setup

# 384 = three of the kernel's 128-position blocks, so documents span and end inside blocks.
BATCH, LENGTH, HEADS, HEAD_DIM = 4, 384, 2, 64


def _segment_ids():
  """Padding and packed documents, with boundaries inside and across the kernel's blocks."""
  ids = np.zeros((BATCH, LENGTH), np.int32)
  ids[0, :180] = 1  # One document, then padding (the last block is all padding).
  ids[1, :100], ids[1, 100:300] = 1, 2  # Two packed documents, then padding.
  ids[2, :] = 1  # No padding.
  ids[3, :60], ids[3, 60:128], ids[3, 128:] = 1, 2, 3  # Three documents, no padding.
  return jnp.asarray(ids)


def _qkv(dtype, seed=0):
  keys = jax.random.split(jax.random.key(seed), 3)
  return tuple(
    jax.random.normal(k, (BATCH, LENGTH, HEADS, HEAD_DIM), jnp.float32).astype(dtype) for k in keys
  )


def _cpu_mesh():
  """data 2 x fsdp 2 x tensor 2: batch split 4 ways, heads 2 ways, as in training."""
  return mesh_lib.make_mesh(mesh_lib.MeshConfig(data=2, fsdp=2, tensor=2))


def _real_BL1(segment_ids_BL):
  return np.asarray(segment_ids_BL > 0)[:, :, None, None]


def test_forward_matches_dense_and_ignores_padding_bf16():
  segment_ids_BL = _segment_ids()
  query, key, value = _qkv(jnp.bfloat16)
  expected = dense.dense_attention(
    *(x.astype(jnp.float32) for x in (query, key, value)), segment_ids_BL
  )
  with setup.mesh_context(_cpu_mesh(), DEFAULT_LOGICAL_AXIS_RULES):
    attend = jax.jit(splash.splash_attention)
    out = attend(query, key, value, segment_ids_BL)
    # Garbage at padding positions must not reach any real token.
    pad = ~_real_BL1(segment_ids_BL)
    noisy = [
      jnp.where(pad, 1e3 * n, x) for n, x in zip(_qkv(jnp.bfloat16, seed=1), (query, key, value))
    ]
    out_noisy = attend(*noisy, segment_ids_BL)
  assert out.dtype == jnp.bfloat16 and out.shape == (BATCH, LENGTH, HEADS, HEAD_DIM)
  real = np.broadcast_to(_real_BL1(segment_ids_BL), out.shape)
  out, out_noisy = np.asarray(out, np.float32), np.asarray(out_noisy, np.float32)
  np.testing.assert_allclose(out[real], np.asarray(expected)[real], atol=2e-2, rtol=2e-2)
  np.testing.assert_array_equal(out_noisy[real], out[real])
  assert np.isfinite(out).all()


def test_gradients_match_dense_and_sharded_equals_unsharded():
  segment_ids_BL = _segment_ids()
  qkv = _qkv(jnp.float32)
  weights = jax.random.normal(jax.random.key(2), (BATCH, LENGTH, HEADS, HEAD_DIM))
  # Only real tokens count: padding outputs are defined differently by the two kernels.
  weights = weights * jnp.asarray(_real_BL1(segment_ids_BL), jnp.float32)

  def loss(fn, query, key, value):
    return jnp.sum(fn(query, key, value, segment_ids_BL) * weights)

  grad = jax.grad(loss, argnums=(1, 2, 3))
  expected = jax.jit(grad, static_argnums=0)(dense.dense_attention, *qkv)
  with setup.mesh_context(_cpu_mesh(), DEFAULT_LOGICAL_AXIS_RULES):
    sharded = jax.jit(jax.value_and_grad(loss, argnums=(1, 2, 3)), static_argnums=0)(
      splash.splash_attention, *qkv
    )
  unsharded_out = jax.jit(splash.splash_attention)(*qkv, segment_ids_BL)
  for got, want in zip(sharded[1], expected):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-5, rtol=1e-4)
  np.testing.assert_allclose(float(sharded[0]), float(jnp.sum(unsharded_out * weights)), rtol=1e-5)


def test_block_sizes():
  assert [splash.block_size(n) for n in (128, 256, 384, 512, 1024)] == [128, 256, 128, 512, 512]


def test_bad_input_is_refused():
  with pytest.raises(UserInputError, match="'splash' has no attention-probability dropout"):
    ModelConfig(attention_kind="splash", attention_dropout_rate=0.1)
  qkv = [jnp.zeros((1, 200, 1, 8))] * 3
  with pytest.raises(
    UserInputError, match="multiple of 128, got 200; use e.g. data.max_seq_length=256"
  ):
    splash.splash_attention(*qkv, jnp.ones((1, 200), jnp.int32))


def _layer_config(kind, dtype="float32"):
  return ModelConfig(
    hidden_size=HEADS * HEAD_DIM,
    num_heads=HEADS,
    num_layers=1,
    intermediate_size=4 * HEADS * HEAD_DIM,
    attention_dropout_rate=0.0,
    attention_kind=kind,
    max_position_embeddings=LENGTH,
    dtype=dtype,
  )


def test_auto_layer_is_dense_on_cpu():
  x_BLD = jax.random.normal(jax.random.key(3), (2, LENGTH, HEADS * HEAD_DIM))
  segment_ids_BL = _segment_ids()[:2]
  params = jax.jit(SelfAttention(_layer_config("dense")).init)(
    jax.random.key(4), x_BLD, segment_ids_BL
  )
  outs = [
    jax.jit(SelfAttention(_layer_config(kind)).apply)(params, x_BLD, segment_ids_BL)
    for kind in ("dense", "auto")
  ]
  np.testing.assert_array_equal(np.asarray(outs[1]), np.asarray(outs[0]))


def _tpu_devices():
  if importlib.util.find_spec("libtpu") is None:
    pytest.skip("libtpu is not installed (pip install -e '.[tpu]'); cannot compile for TPU")
  return topologies.topology_devices(topologies.get_topology("v5e-4"))


def test_auto_layer_compiles_to_the_splash_kernel_for_a_tpu_topology():
  devices = _tpu_devices()
  mesh = mesh_lib.make_mesh(mesh_lib.MeshConfig(data=2, fsdp=1, tensor=2), devices=devices)
  layer = SelfAttention(_layer_config("auto", dtype="bfloat16"))
  x = jax.ShapeDtypeStruct(
    (BATCH, LENGTH, HEADS * HEAD_DIM),
    jnp.float32,
    sharding=NamedSharding(mesh, PartitionSpec(("data", "fsdp"))),
  )
  segment_ids = jax.ShapeDtypeStruct((BATCH, LENGTH), jnp.int32, sharding=x.sharding)

  def loss(params, x_BLD, segment_ids_BL):
    return jnp.sum(layer.apply(params, x_BLD, segment_ids_BL).astype(jnp.float32) ** 2)

  init_rng = jax.random.key(0)  # Made outside the TPU mesh: nothing may run eagerly on it.
  with setup.mesh_context(mesh, DEFAULT_LOGICAL_AXIS_RULES):
    params = jax.eval_shape(layer.init, init_rng, x, segment_ids)
    params = jax.tree.map(
      lambda p: jax.ShapeDtypeStruct(
        p.shape, p.dtype, sharding=NamedSharding(mesh, PartitionSpec())
      ),
      params,
    )
    compiled = (
      jax.jit(jax.value_and_grad(loss, argnums=(0, 1))).lower(params, x, segment_ids).compile()
    )
  text = compiled.as_text()
  # Forward kernel plus the fused backward kernel, each a Mosaic custom call.
  assert text.count("tpu_custom_call") >= 2, text[:2000]
