"""Flash attention's TPU (Mosaic) kernels: in Pallas interpret mode they equal dense attention
with `flash_dropout`'s mask, and the Triton kernels, in outputs and gradients; compiled for a
TPU topology from this CPU host they are Mosaic custom calls with no [.., L, L] array.

Nothing here runs on a TPU: interpret mode checks the maths, the ahead-of-time compile checks
that Mosaic takes the kernels.
"""

import functools
import importlib.util
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from bert_jax.errors import UserInputError
from bert_jax.models.attention import auto, dense, flash, flash_dropout, flash_tpu
from bert_jax.models.attention.layer import SelfAttention
from bert_jax.models.config import ModelConfig
from bert_jax.parallel import mesh as mesh_lib
from bert_jax.parallel import topologies
from bert_jax.parallel.mesh import DEFAULT_LOGICAL_AXIS_RULES
from bert_jax.tools import aot_step
from bert_jax.train import setup

# Blocks of 128 over 256 positions: a 2 x 2 grid of tiles per (sequence, head) in every kernel.
BATCH, LENGTH, HEADS, HEAD_DIM, BLOCK = 3, 256, 2, 64, 128
RATE = 0.1


def _segment_ids():
  ids = np.zeros((BATCH, LENGTH), np.int32)
  ids[0, :100] = 1  # One document, then padding: the second key block is all padding.
  ids[1, :90], ids[1, 90:200], ids[1, 200:] = 1, 2, 3  # Packed, one spanning both blocks.
  return jnp.asarray(ids)  # Row 2 is all padding (a batch's filler).


def _real_BL11(segment_ids_BL):
  return (segment_ids_BL != 0)[:, :, None, None]


@functools.partial(jax.jit, static_argnames=("kernel", "rate"))
def _out_and_grads(query, key, value, segment_ids_BL, d_out, rng, *, kernel, rate):
  """``kernel``'s output and q/k/v gradients: "tpu" (Mosaic kernels, interpreted), "gpu"
  (Triton kernels, interpreted: the CPU default) or "dense" (float32, flash's dropout mask)."""

  def attend(q, k, v):
    if kernel == "tpu":
      stream_BH = flash_dropout.streams_BH(rng, BATCH, HEADS)
      return flash_tpu.attention(
        q, k, v, segment_ids_BL, stream_BH, dropout_rate=rate, block=BLOCK, interpret=True
      )
    if kernel == "gpu":
      return flash.flash_attention(
        q, k, v, segment_ids_BL, dropout_rate=rate, dropout_rng=rng if rate else None
      )
    _, probs_BHQK = dense.dense_attention(q, k, v, segment_ids_BL, return_probs=True)
    keep_BHQK = flash_dropout.keep_mask_BHQK(rng, probs_BHQK.shape, rate)
    kept_BHQK = jnp.where(keep_BHQK, probs_BHQK / (1 - rate), 0.0)
    out = jnp.einsum("bhqk,bkhd->bqhd", kept_BHQK, v)
    return jnp.where(_real_BL11(segment_ids_BL), out, 0.0)

  with jax.default_matmul_precision("highest"):
    out, vjp = jax.vjp(attend, query, key, value)
    return out, vjp(d_out)


@functools.cache
def _results(kernel, rate):
  """One shared run per kernel and rate, on the same inputs and rng (interpret mode is slow)."""
  keys = jax.random.split(jax.random.key(0), 4)
  shape = (BATCH, LENGTH, HEADS, HEAD_DIM)
  qkv = tuple(2 * jax.random.normal(k, shape) for k in keys[:3])
  d_out = jax.random.normal(keys[3], shape)  # On every position, padding included.
  out, grads = _out_and_grads(
    *qkv, _segment_ids(), d_out, jax.random.key(1), kernel=kernel, rate=rate
  )
  return [np.asarray(x) for x in (out, *grads, *qkv, d_out)]


def _max_errors(got, want):
  """Max abs error of each array, in units of the array's largest |value| when that is > 1
  (float32 rounding of gradients of size ~10 is ~1e-6 of it)."""
  return [float(np.max(np.abs(g - w)) / max(1.0, np.max(np.abs(w)))) for g, w in zip(got, want)]


@pytest.mark.parametrize("rate", [0.0, RATE])
def test_tpu_kernels_match_dense_with_the_flash_mask(rate):
  out, dq, dk, dv, *_ = got = _results("tpu", rate)
  errors = _max_errors(got[:4], _results("dense", rate)[:4])
  print(f"rate {rate}: TPU kernels vs dense, max error out, dq, dk, dv = {errors}")
  assert max(errors) < 1e-5, errors
  # Padding queries: zero output and no gradient; padding keys and values: no gradient.
  pad = np.broadcast_to(~np.asarray(_real_BL11(_segment_ids())), out.shape)
  for x in (out, dq, dk, dv):
    assert not np.any(x[pad])
  assert np.all(np.isfinite(got[:4]))


def test_tpu_kernels_equal_the_gpu_kernels():
  """One dropout mask: the same rng drops the same probabilities on both platforms."""
  errors = _max_errors(_results("tpu", RATE)[:4], _results("gpu", RATE)[:4])
  print(f"TPU vs GPU kernels, max error out, dq, dk, dv = {errors}")
  assert max(errors) < 1e-5, errors


def test_the_backward_drops_what_the_forward_dropped():
  """out is linear in value through the dropped probabilities: <out, d_out> = <value, d_value>
  for one mask; a backward drawing another mask breaks it (off by ~10%)."""
  out, _, _, d_value, _, _, value, d_out = _results("tpu", RATE)
  lhs, rhs = float(np.sum(out * d_out)), float(np.sum(value * d_value))
  print(f"<out, d_out> = {lhs}, <value, d_value> = {rhs}")
  np.testing.assert_allclose(lhs, rhs, rtol=1e-4)


def test_a_length_not_a_multiple_of_128_is_refused():
  qkv = [jnp.zeros((1, 200, 1, 64))] * 3
  with pytest.raises(
    UserInputError, match="on TPU needs .* multiple of 128, got 200; use e.g. data.max_seq_len"
  ):
    flash_tpu.attention(*qkv, jnp.ones((1, 200), jnp.int32), jnp.zeros((1, 1)), dropout_rate=0)


def _tpu_mesh():
  """data 2 x tensor 2 over a v5e-4 topology's compile-only devices."""
  if importlib.util.find_spec("libtpu") is None:
    pytest.skip("libtpu is not installed (pip install -e '.[tpu]'); cannot compile for TPU")
  devices = topologies.topology_devices(topologies.get_topology("v5e-4"))
  return mesh_lib.make_mesh(mesh_lib.MeshConfig(data=2, fsdp=1, tensor=2), devices=devices)


def _layer_config(length, attention_dropout_rate, attention_kind):
  """A bf16 one-layer config of this file's heads, for layers compiled for a TPU."""
  return ModelConfig(
    hidden_size=HEADS * HEAD_DIM,
    num_heads=HEADS,
    num_layers=1,
    intermediate_size=4 * HEADS * HEAD_DIM,
    attention_dropout_rate=attention_dropout_rate,
    attention_kind=attention_kind,
    max_position_embeddings=length,
    dtype="bfloat16",
  )


def test_flash_on_a_tpu_mesh_refuses_a_length_not_a_multiple_of_128():
  qkv = [jax.ShapeDtypeStruct((4, 144, 2, 64), jnp.bfloat16)] * 3
  segment_ids = jax.ShapeDtypeStruct((4, 144), jnp.int32)
  with setup.mesh_context(_tpu_mesh(), DEFAULT_LOGICAL_AXIS_RULES):
    with pytest.raises(UserInputError, match="got 144; use e.g. data.max_seq_length=256 or"):
      jax.eval_shape(flash.flash_attention, *qkv, segment_ids)


def test_flash_layer_compiles_to_mosaic_kernels_for_a_tpu_topology():
  """A bf16 layer with attention dropout 0.1, fwd + bwd: the real Mosaic compile."""
  mesh = _tpu_mesh()
  batch, length = 4, 256
  config = _layer_config(length, RATE, "flash")
  layer = SelfAttention(config, deterministic=False)
  x = jax.ShapeDtypeStruct(
    (batch, length, HEADS * HEAD_DIM),
    jnp.float32,
    sharding=NamedSharding(mesh, PartitionSpec("data")),
  )
  segment_ids = jax.ShapeDtypeStruct((batch, length), jnp.int32, sharding=x.sharding)
  rng = jax.random.key(0)  # Made outside the TPU mesh: nothing may run eagerly on it.

  def loss(params, x_BLD, segment_ids_BL, rng):
    out = layer.apply(params, x_BLD, segment_ids_BL, rngs={"dropout": rng})
    return jnp.sum(out.astype(jnp.float32) ** 2)

  with setup.mesh_context(mesh, DEFAULT_LOGICAL_AXIS_RULES):
    params = jax.eval_shape(layer.init, {"params": rng, "dropout": rng}, x, segment_ids)
    params = jax.tree.map(
      lambda p: jax.ShapeDtypeStruct(
        p.shape, p.dtype, sharding=NamedSharding(mesh, PartitionSpec())
      ),
      params,
    )
    grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    compiled = grad.lower(params, x, segment_ids, rng).compile()
  text = compiled.as_text()
  # The forward, the dK/dV and the dQ kernel, each a Mosaic custom call.
  assert text.count("tpu_custom_call") >= 3, text[:2000]
  for name in ("forward", "key_gradients", "query_gradients"):
    assert f"flash_attention_tpu_{name}" in text
  squares = re.findall(rf"(?:bf16|f32)\[[\d,]*{length},{length}\]", text)
  assert not squares, squares
  # The kernels tell XLA's cost analysis their products (2 + 4 + 3 [L, L, D] ones per sequence
  # and head: forward, dK/dV, dQ), so aot_compile's FLOPs and bytes include them.
  counted = aot_step.cost(compiled)
  flops, not_counted = counted["flops"], counted["missing"]
  per_device_pairs = (batch // 2) * (HEADS // 2) * length * length
  assert not_counted == ()
  assert flops >= 2 * 9 * per_device_pairs * HEAD_DIM, flops
  # libtpu gives the kernels no estimated cycles; their own estimates stand in (aot_compile's
  # compiler estimate adds them at the chip's roofline).
  assert counted["kernel_flops"] >= 2 * 9 * per_device_pairs * HEAD_DIM, counted
  assert counted["kernel_bytes"] > 0


def test_auto_rule():
  assert auto.auto_kind("tpu", 512, 0.0, 64) == "splash"
  assert auto.auto_kind("tpu", 128, 0.0, 64) == "splash"
  assert auto.auto_kind("tpu", 512, RATE, 64) == "flash"  # BERT's seq-512 phase.
  assert auto.auto_kind("tpu", 1024, RATE, 128) == "flash"
  assert auto.auto_kind("tpu", 128, RATE, 64) == "dense"  # BERT's seq-128 phase: a tie.
  assert auto.auto_kind("tpu", 512, RATE, 48) == "dense"  # A head size flash does not take.
  assert auto.auto_kind("tpu", 200, 0.0, 64) == "dense"  # Not a multiple of 128.
  assert auto.auto_kind("cpu", 512, RATE, 64) == "dense"
  # GPU: the Triton flash kernels wherever they tile the length, with or without dropout.
  assert auto.auto_kind("gpu", 128, RATE, 64) == "flash"
  assert auto.auto_kind("gpu", 512, 0.0, 64) == "flash"
  assert auto.auto_kind("gpu", 136, RATE, 64) == "dense"  # Not a multiple of 16.
  assert auto.auto_kind("gpu", 128, RATE, 48) == "dense"


@pytest.mark.parametrize(
  "length,rate,kernel",
  [(512, RATE, "flash_attention_tpu_forward"), (512, 0.0, "splash"), (256, RATE, None)],
  ids=["flash", "splash", "dense"],
)
def test_an_auto_layer_on_a_tpu_runs_the_kernel_the_rule_names(length, rate, kernel):
  """The layer lowered for a TPU mesh: the Mosaic kernel it calls, or none (dense)."""
  mesh = _tpu_mesh()
  config = _layer_config(length, rate, "auto")
  layer = SelfAttention(config, deterministic=False)
  sharding = NamedSharding(mesh, PartitionSpec("data"))
  x = jax.ShapeDtypeStruct((4, length, HEADS * HEAD_DIM), jnp.float32, sharding=sharding)
  segment_ids = jax.ShapeDtypeStruct((4, length), jnp.int32, sharding=sharding)
  rng = jax.random.key(0)
  with setup.mesh_context(mesh, DEFAULT_LOGICAL_AXIS_RULES):
    params = jax.eval_shape(layer.init, {"params": rng, "dropout": rng}, x, segment_ids)
    text = (
      jax.jit(lambda p, x, s, r: layer.apply(p, x, s, rngs={"dropout": r}))
      .lower(params, x, segment_ids, rng)
      .as_text()
    )
  calls = re.findall(r'kernel_name = "([^"]+)"', text)
  if kernel is None:
    assert "tpu_custom_call" not in text
  else:
    assert any(kernel in name for name in calls), calls
