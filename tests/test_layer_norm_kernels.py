"""The Triton layer norm (``model.layer_norm_kind='triton'``) computes layer normalisation:
outputs and gradients against float64, per shard under a mesh, in a whole train step; lowered
for CUDA it is one kernel each way; a TPU refuses it.

On CPU the kernels run in Pallas interpret mode; on a GPU host
(``JAX_PLATFORMS=cuda,cpu python -m pytest tests/test_layer_norm_kernels.py``, which
``launch/gpu_benchmark.sh --gpu_tests`` runs) the same tests run the compiled kernels.
"""

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.errors import UserInputError
from bert_jax.models import layer_norm, layer_norm_kernels, layers
from bert_jax.models.config import ModelConfig
from bert_jax.models.families import model_config_from_dict
from bert_jax.parallel import mesh as mesh_lib
from bert_jax.parallel import topologies
from bert_jax.parallel.mesh import DEFAULT_LOGICAL_AXIS_RULES
from bert_jax.tasks.pretraining import PretrainingTask
from bert_jax.train import setup
from tests import helpers

EPSILON = 1e-12


def _inputs(shape, dtype):
  keys = jax.random.split(jax.random.key(0), 5)
  # Rows with an offset and a spread of their own, as a residual stream has; some rows'
  # spread is 2% of their mean, where E[x²] − E[x]² loses digits.
  spread = jax.random.uniform(keys[1], shape[:-1] + (1,), minval=0.05, maxval=2.0)
  x = 3.0 + jax.random.normal(keys[0], shape) * spread
  scale = 1.0 + 0.3 * jax.random.normal(keys[2], shape[-1:])
  bias = 0.1 * jax.random.normal(keys[3], shape[-1:])
  d_y = jax.random.normal(keys[4], shape)
  return x.astype(dtype), scale, bias, d_y


def _float64_norm_and_gradients(x, scale, bias, d_y):
  """Layer norm's output and its gradients for the output gradient ``d_y``, in float64."""
  x, scale, bias, d_y = (np.asarray(a, np.float64) for a in (x, scale, bias, d_y))
  centred = x - x.mean(-1, keepdims=True)
  inv_std = 1.0 / np.sqrt((centred**2).mean(-1, keepdims=True) + EPSILON)
  normalized = centred * inv_std
  d_normalized = d_y * scale
  d_x = inv_std * (
    d_normalized
    - d_normalized.mean(-1, keepdims=True)
    - normalized * (d_normalized * normalized).mean(-1, keepdims=True)
  )
  rows = tuple(range(x.ndim - 1))
  return normalized * scale + bias, (d_x, (d_y * normalized).sum(rows), d_y.sum(rows))


def _kernel_norm_and_gradients(x, scale, bias, d_y, dtype, options):
  def norm(x, scale, bias):
    return layer_norm.normalize(x, scale, bias, EPSILON, dtype, options)

  y, vjp = jax.vjp(norm, x, scale, bias)
  return y, vjp(d_y.astype(y.dtype))


def _interpret_or_gpu(launch=None):
  """The options `layer_norm.kernel_options` gives here (compiled on a GPU), with ``launch``."""
  options = layer_norm.kernel_options("triton")
  return layer_norm_kernels.Options(launch=launch or options.launch, interpret=options.interpret)


def _assert_close(got, want, relative):
  """Within ``relative`` of the largest magnitude of ``want``."""
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  np.testing.assert_allclose(got, want, rtol=0, atol=relative * np.abs(want).max())


@pytest.mark.parametrize(
  "shape, launch",
  [
    # 48 columns load as 64 masked lanes; 15 rows: blocks of one row.
    ((3, 5, 48), layer_norm_kernels.Launch()),
    # No masked lanes; 4 programs of 32 rows each walking 8 blocks of 4.
    ((4, 32, 128), layer_norm_kernels.Launch(backward_rows_per_program=32)),
    # 96 columns as 128 lanes; blocks of 2 rows, 8 rows a backward program.
    ((2, 64, 96), layer_norm_kernels.Launch(2, 4, 2, 8, 4)),
  ],
  ids=["masked-lanes-single-rows", "full-lanes-looping", "masked-lanes-small-blocks"],
)
@pytest.mark.parametrize(
  "dtype, tolerance", [(jnp.float32, 1e-5), (jnp.bfloat16, 1e-2)], ids=["float32", "bfloat16"]
)
def test_outputs_and_gradients_equal_float64_layer_norm(shape, launch, dtype, tolerance):
  x, scale, bias, d_y = _inputs(shape, dtype)
  y, grads = _kernel_norm_and_gradients(x, scale, bias, d_y, dtype, _interpret_or_gpu(launch))
  want_y, want_grads = _float64_norm_and_gradients(x, scale, bias, d_y.astype(dtype))
  assert y.dtype == dtype and grads[0].dtype == dtype
  assert grads[1].dtype == grads[2].dtype == jnp.float32
  _assert_close(y, want_y, tolerance)
  for got, want in zip(grads, want_grads):
    _assert_close(got, want, tolerance)


def test_more_exact_than_xla_norm_where_a_rows_mean_dwarfs_its_spread():
  """The kernels' variance is the mean squared deviation; XLA's path (Flax's) takes
  E[x²] − E[x]², which loses digits on rows whose spread is 2% of their mean."""
  x, scale, bias, d_y = _inputs((3, 5, 48), jnp.float32)
  want_y, _ = _float64_norm_and_gradients(x, scale, bias, d_y)
  kernel_y, _ = _kernel_norm_and_gradients(x, scale, bias, d_y, jnp.float32, _interpret_or_gpu())
  xla_y = layer_norm.normalize(x, scale, bias, EPSILON, jnp.float32, None)
  kernel_error = np.abs(np.asarray(kernel_y, np.float64) - want_y).max()
  xla_error = np.abs(np.asarray(xla_y, np.float64) - want_y).max()
  assert kernel_error < 1e-5 < xla_error, (kernel_error, xla_error)


@pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 devices (CPU: conftest's fake ones)")
def test_sharded_equals_unsharded():
  """data 2 x fsdp 2 x tensor 2: the rows split 4 ways, the parameters' gradients summed."""
  config = ModelConfig(hidden_size=96, num_heads=2, layer_norm_kind="triton")
  module = layers.layer_norm(config, "norm")
  x, _, _, d_y = _inputs((8, 16, 96), jnp.float32)
  params = module.init(jax.random.key(0), x)

  @jax.jit
  def norm_and_gradients(params, x):
    y, vjp = jax.vjp(module.apply, params, x)
    return y, vjp(d_y)

  want = norm_and_gradients(params, x)
  mesh = mesh_lib.make_mesh(mesh_lib.MeshConfig(data=2, fsdp=2, tensor=2))
  with setup.mesh_context(mesh, DEFAULT_LOGICAL_AXIS_RULES):
    got = norm_and_gradients(params, x)
    jaxpr = norm_and_gradients.trace(params, x).jaxpr
  assert "shard_map" in str(jaxpr)
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    _assert_close(g, w, 1e-6)


@pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 devices (CPU: conftest's fake ones)")
def test_a_train_step_on_8_devices_is_xlas_on_1():
  """The tiny model's whole train step with the kernels on data 2 x tensor 4 equals the step
  with XLA's norm on one device (float32; rows of an ordinary spread, where the two variance
  formulas agree)."""

  def step(kind, devices, **axes):
    config = helpers.small_config(**{"model.layer_norm_kind": kind, **axes})
    return helpers.one_train_step(config, devices)

  _, params_8, metrics_8, _ = step("triton", jax.devices(), **{"mesh.data": 2, "mesh.tensor": 4})
  _, params_1, metrics_1, _ = step("xla", jax.devices()[:1], **{"mesh.data": 1})
  for key in ("mlm_loss", "nsp_loss", "grad_norm"):
    np.testing.assert_allclose(metrics_8[key], metrics_1[key], rtol=2e-5, err_msg=key)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-4), params_8, params_1
  )


def test_every_norm_of_bert_is_the_kernel():
  config = model_config_from_dict({"size": "tiny", "vocab_size": 128, "layer_norm_kind": "triton"})
  task = PretrainingTask(config, 64, 8)
  model = task.model(deterministic=True)
  jaxpr = jax.make_jaxpr(model.init)(jax.random.key(0), *task.model_inputs(task.random_batch(2)))
  # The embeddings', two per layer of two, the MLM head's transform.
  assert str(jaxpr).count("pallas_call") == 6


def test_lowered_for_cuda_each_pass_is_one_triton_kernel():
  """BERT-base's rows (bf16, 2 x 128 x 768), lowered for CUDA from this host: a forward and a
  backward kernel; the only float32 arrays of the rows' size are none (the kernels upcast)."""
  x = jax.ShapeDtypeStruct((2, 128, 768), jnp.bfloat16)
  vector = jax.ShapeDtypeStruct((768,), jnp.float32)
  options = layer_norm_kernels.Options()

  def loss(x, scale, bias):
    y = layer_norm.normalize(x, scale, bias, EPSILON, jnp.bfloat16, options)
    return jnp.sum(y.astype(jnp.float32) ** 2)

  lowered = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).trace(x, vector, vector)
  text = lowered.lower(lowering_platforms=("cuda",)).as_text()
  calls = [line for line in text.splitlines() if "@__gpu$xla.gpu.triton" in line]
  assert len(calls) == 2, text[:3000]
  assert "layer_norm_forward" in text and "layer_norm_backward" in text


def test_bad_kinds_are_refused():
  with pytest.raises(UserInputError, match="layer_norm_kind='pallas' is unknown; choose one of"):
    ModelConfig(layer_norm_kind="pallas")
  if importlib.util.find_spec("libtpu") is None:
    pytest.skip("libtpu is not installed (pip install -e '.[tpu]'); cannot compile for TPU")
  devices = topologies.topology_devices(topologies.get_topology("v5e-4"))
  mesh = mesh_lib.make_mesh(mesh_lib.MeshConfig(data=4, fsdp=1, tensor=1), devices=devices)
  with setup.mesh_context(mesh, DEFAULT_LOGICAL_AXIS_RULES):
    with pytest.raises(UserInputError, match="runs on NVIDIA GPUs; on TPUs use"):
      layer_norm.kernel_options("triton")
    assert layer_norm.kernel_options("auto") is None
