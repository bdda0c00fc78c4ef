"""The feed-forward's hand-written backward equals autodiff of the same maths; GELU is the exact one."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
from jax.sharding import NamedSharding, PartitionSpec

from bert_jax.models import feed_forward, layers
from bert_jax.parallel import gpu_topologies
from bert_jax.tools import compiled_ops


def _autodiff_reference(activation, y, bias_in, kernel, bias):
  return activation(y + bias_in[None, None]) @ kernel + bias[None, None]


@pytest.mark.parametrize("keep_output", [False, True], ids=["recompute", "keep_output"])
@pytest.mark.parametrize("activation", [layers.gelu, layers.gelu_tanh, jax.nn.relu])
def test_activation_then_dense_gradients_equal_autodiff(activation, keep_output):
  """Outputs and all four gradients in float32, over two leading dimensions, for both
  backward forms (recomputing the activation: TPU, CPU; keeping it: GPU)."""
  keys = jax.random.split(jax.random.key(0), 5)
  y = 2 * jax.random.normal(keys[0], (3, 5, 24), jnp.float32)
  bias_in = jax.random.normal(keys[4], (24,), jnp.float32)
  kernel = jax.random.normal(keys[1], (24, 8), jnp.float32) / 5
  bias = jax.random.normal(keys[2], (8,), jnp.float32)
  d_out = jax.random.normal(keys[3], (3, 5, 8), jnp.float32)

  def custom(*args):
    return feed_forward.activation_then_dense(activation, keep_output, *args)

  def reference(*args):
    return _autodiff_reference(activation, *args)

  out, custom_vjp = jax.vjp(custom, y, bias_in, kernel, bias)
  want, reference_vjp = jax.vjp(reference, y, bias_in, kernel, bias)
  np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
  for got, expected in zip(custom_vjp(d_out), reference_vjp(d_out)):
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_kept_activation_backward_reads_it_and_writes_the_input_gradient_in_bf16():
  """The GPU form's backward evaluates no GELU (erf) and passes the pre-activation's gradient
  on in bf16 only; the TPU form recomputes GELU in each of its two products."""
  y = jnp.ones((2, 4, 16), jnp.bfloat16)
  bias_in = jnp.ones((16,), jnp.float32)
  kernel = jnp.ones((16, 8), jnp.bfloat16)
  bias = jnp.ones((8,), jnp.bfloat16)

  def backward(keep_output):
    def loss(*args):
      out = feed_forward.activation_then_dense(layers.gelu, keep_output, *args)
      return jnp.sum(out.astype(jnp.float32))

    _, vjp = jax.vjp(loss, y, bias_in, kernel, bias)
    return jax.make_jaxpr(vjp)(jnp.float32(1.0))

  kept_jaxpr = backward(True)
  recomputed_jaxpr = backward(False)

  def erf_count(jaxpr):
    return str(jaxpr).count(" erf ")

  # jax.vjp of GELU evaluates it once for its derivative; the recomputing form also for the
  # kernel's product.
  assert erf_count(recomputed_jaxpr) == 2
  assert erf_count(kept_jaxpr) == 1
  barrier_outputs = [
    eqn.outvars[0].aval
    for eqn in kept_jaxpr.jaxpr.eqns
    if eqn.primitive.name == "optimization_barrier"
  ]
  assert [(a.shape, a.dtype) for a in barrier_outputs] == [((2, 4, 16), jnp.bfloat16)]


def test_chunked_feed_forward_gradients_equal_unchunked():
  """The chunked (rematerialised) form differentiates like the whole sequence at once."""
  keys = jax.random.split(jax.random.key(1), 5)
  x = jax.random.normal(keys[0], (2, 10, 16), jnp.float32)
  weights = (
    (jax.random.normal(keys[1], (16, 32)) / 4, jax.random.normal(keys[2], (32,))),
    (jax.random.normal(keys[3], (32, 16)) / 6, jax.random.normal(keys[4], (16,))),
  )

  def loss(x, weights, chunk_len):
    out = feed_forward.chunked_feed_forward(x, weights, dtype=jnp.float32, chunk_len=chunk_len)
    return jnp.sum(jnp.sin(out))

  whole = jax.grad(loss, argnums=(0, 1))(x, weights, 0)
  chunked = jax.grad(loss, argnums=(0, 1))(x, weights, 4)
  for got, want in zip(jax.tree.leaves(chunked), jax.tree.leaves(whole)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(
  not gpu_topologies.plugin_installed(), reason="needs jax's CUDA plugin (pip install -e '.[cuda]')"
)
def test_on_an_h100_the_first_bias_gradient_is_summed_in_the_activation_gradient_fusion():
  """Compiled for an H100 from this host (bf16, BERT-base's feed-forward over 256 x 128 rows):
  the fusion that writes the pre-activation's bf16 gradient also writes the first bias's
  float32 per-column partial sums, so no kernel reads that [rows, 3072] gradient back for the
  bias alone (it did when the bias was added outside: 201 MB a layer)."""
  devices = gpu_topologies.topology_devices(gpu_topologies.get_topology("h100-1"))
  mesh = jax.sharding.Mesh(np.array(devices[:1]), ("x",))

  def spec(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, PartitionSpec()))

  width, inner = 768, 3072
  x = spec((256, 128, width), jnp.bfloat16)
  weights = (
    (spec((width, inner), jnp.float32), spec((inner,), jnp.float32)),
    (spec((inner, width), jnp.float32), spec((width,), jnp.float32)),
  )

  def loss(x, weights):
    out = feed_forward.chunked_feed_forward(x, weights, dtype=jnp.bfloat16, chunk_len=0)
    return jnp.sum(jnp.square(out.astype(jnp.float32)))

  with jax.set_mesh(mesh):
    text = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(x, weights).compile().as_text()
  results = [
    line.split(" = ", 1)[1].split(" fusion(", 1)[0]
    for line in compiled_ops.entry_lines(text)
    if " fusion(" in line
  ]
  gradient = f"bf16[{256 * 128},{inner}]"

  def has_partials(result):  # f32 [k, inner] column sums; [width, inner] is the kernel's gradient.
    return any(int(k) != width for k in re.findall(rf"f32\[(\d+),{inner}\]", result))

  assert [r for r in results if gradient in r and has_partials(r)], results
  assert len([r for r in results if has_partials(r)]) == 1, results


@pytest.mark.parametrize("dtype, tolerance", [(jnp.float32, 2e-6), (jnp.bfloat16, 8e-3)])
def test_gelu_is_the_exact_erf_gelu_in_both_dtypes(dtype, tolerance):
  """Within float32's error of the float64 formula (and one bf16 rounding in bf16), the
  negative tail too, where ``1 + erf`` cancels; its gradient the exact derivative."""
  x = np.concatenate([np.linspace(-9.0, 9.0, 4001), [-30.0, 30.0]]).astype(np.float32)
  x = np.asarray(jnp.asarray(x, dtype).astype(jnp.float32), np.float64)  # Representable.
  exact = 0.5 * x * (1.0 + scipy.special.erf(x / np.sqrt(2.0)))
  got = np.asarray(layers.gelu(jnp.asarray(x, dtype)).astype(jnp.float32), np.float64)
  np.testing.assert_allclose(got, exact, rtol=tolerance, atol=2e-6)
  slope = np.asarray(jax.vmap(jax.grad(layers.gelu))(jnp.asarray(x, jnp.float32)), np.float64)
  exact_slope = 0.5 * (1.0 + scipy.special.erf(x / np.sqrt(2.0))) + x * np.exp(
    -0.5 * x * x
  ) / np.sqrt(2.0 * np.pi)
  np.testing.assert_allclose(slope, exact_slope, rtol=2e-6, atol=2e-6)


def test_gelu_uses_erf_not_erfc():
  """erfc is what jax.nn.gelu(approximate=False) lowers to: two branches and an exp per element."""
  text = jax.jit(layers.gelu).lower(jnp.ones((4, 8), jnp.bfloat16)).as_text()
  assert "erf" in text and "erfc" not in text
