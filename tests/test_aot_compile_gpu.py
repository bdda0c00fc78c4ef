"""Ahead-of-time compiles for NVIDIA GPUs on this CPU host (jax's CUDA plugin compiles from a
target config; no GPU or driver): the real train step's memory, FLOPs and kernels, data
parallelism over 8 GPUs, and refusals."""

import pytest

from bert_jax.errors import UserInputError
from bert_jax.parallel import gpu_topologies
from bert_jax.tools import aot_compile, aot_step, compiled_ops
from tests import helpers

needs_cuda_plugin = pytest.mark.skipif(
  not gpu_topologies.plugin_installed(),
  reason="jax's CUDA plugin is not installed (pip install -e '.[cuda]')",
)

NO_DROPOUT = {"model.hidden_dropout_rate": 0.0, "model.attention_dropout_rate": 0.0}
# Dense attention, whose FLOPs XLA counts (`auto` is flash on GPU: Triton kernels it does not).
DENSE = {**NO_DROPOUT, "model.attention_kind": "dense"}


@pytest.fixture(scope="module")
def h100():
  return aot_compile.aot_compile(helpers.small_config(**DENSE), "h100-1")


@needs_cuda_plugin
def test_the_step_compiles_for_an_h100_with_its_memory_flops_and_kernels(h100):
  report = h100.report
  assert report["device_kind"] == "NVIDIA H100 80GB HBM3" and report["devices"] == 1
  # JAX gives a program 75% of the GPU's memory by default.
  assert report["hbm_bytes"] == int(84_942_979_072 * 0.75)
  memory = report["memory"]
  assert report["fits"] and 0 < memory["arguments"] <= memory["total"] < report["hbm_bytes"]
  # XLA's analysis of the GPU program (the CPU client runs it: the GPU executable has none).
  assert report["cost_source"] == "compiled step" and not report["flops_lower_bound"]
  assert 1.0 < report["flops_ratio"] < 1.3 and report["bytes_accessed"] > 0
  assert report["roofline"]["compute_s"] == pytest.approx(report["compiled_flops"] / 989e12)
  assert report["roofline"]["memory_s"] == pytest.approx(report["bytes_accessed"] / 3.35e12)
  # GPU programs carry no per-op cycle estimates.
  assert report["compiler_estimate"] == {
    "cycles": 0,
    "kernels_s": None,
    "step_s": None,
    "mfu": None,
  }
  text = h100.compiled.as_text()
  # The train step compiles with XLA's Triton GEMMs off on GPU (train/compiler_options.py):
  # every matmul is a cuBLAS call, some with the bias in their epilogue, and their FLOPs are
  # counted (compiled_ops.cublas_gemm_cost; the CPU client's analysis does not see them).
  assert '"kind":"__triton_nested_gemm_fusion"' not in text
  gemms = text.count('custom_call_target="__cublas$lt$matmul"')
  assert gemms >= 6 and report["kernels"] > gemms and '"epilogue":"BIAS"' in text
  gemm_flops, _ = compiled_ops.cublas_gemm_cost(text)
  assert 0.5 * report["compiled_flops"] < gemm_flops < report["compiled_flops"]


@needs_cuda_plugin
def test_eight_h100s_split_the_batch_and_all_reduce_the_gradients(h100):
  result = aot_compile.aot_compile(helpers.small_config(**DENSE), "h100-8")
  report = result.report
  assert report["devices"] == 8 and report["mesh"] == {"data": 8, "fsdp": 1, "tensor": 1}
  assert "all-reduce" in result.compiled.as_text()
  # The state is replicated: each GPU holds what the single GPU held; the batch is split.
  single = h100.report["memory"]
  assert report["memory"]["aliased"] == single["aliased"]
  assert report["compiled_flops"] < h100.report["compiled_flops"] / 4


@needs_cuda_plugin
def test_auto_attention_is_flash_on_an_h100_and_is_reported_as_not_counted():
  result = aot_compile.aot_compile(helpers.small_config(), "h100-1")
  # The three Triton kernels (forward, dK/dV, dQ) went through Triton to Hopper code.
  assert result.compiled.as_text().count('custom_call_target="__gpu$xla.gpu.triton"') >= 3
  assert result.report["flops_not_counted"] == aot_step.TRITON_NOT_COUNTED
  assert result.report["flops_lower_bound"]


@pytest.mark.parametrize(
  "topology,num_slices,message",
  [
    ("a100-8", 1, "unknown GPU topology 'a100-8'; use <gpu>-<count> with gpu one of h100, h200"),
    ("h100-12", 1, "GPU topology 'h100-12': 12 GPUs; use 1 to 8 on one host or a multiple of 8"),
    ("h100-8", 2, "--num_slices=2 joins TPU slices; a GPU topology counts its GPUs in its name"),
  ],
  ids=["gpu", "count", "slices"],
)
def test_bad_gpu_topologies_are_refused_with_the_valid_choices(topology, num_slices, message):
  with pytest.raises(UserInputError) as error:
    aot_compile.aot_compile(helpers.small_config(), topology, num_slices)
  assert str(error.value).startswith(message)


def test_without_the_cuda_plugin_the_error_names_the_install(monkeypatch):
  monkeypatch.setattr(gpu_topologies.importlib.util, "find_spec", lambda name: None)
  with pytest.raises(UserInputError, match=r"pip install -e '\.\[cuda\]'"):
    gpu_topologies.topology_devices(gpu_topologies.get_topology("h100-1"))


@needs_cuda_plugin
def test_compiling_for_a_gpu_with_gpus_enabled_names_jax_platforms(monkeypatch):
  monkeypatch.setenv("JAX_PLATFORMS", "cuda,cpu")
  with pytest.raises(UserInputError, match="needs JAX_PLATFORMS=cpu"):
    gpu_topologies.topology_devices(gpu_topologies.get_topology("h200-1"))


def test_the_target_config_describes_the_gpu():
  config = gpu_topologies.GPUS["h200"].target_config()
  for field in (
    "core_count: 132",
    "memory_bandwidth: 4800000000000",
    "device_memory_size: 151397597184",
    "cuda_compute_capability { major: 9 minor: 0 }",
    'device_description_str: "NVIDIA H200"',
  ):
    assert field in config


@needs_cuda_plugin
def test_a_scanned_step_is_counted_through_unrolled_gpu_compiles():
  config = helpers.small_config(**NO_DROPOUT, **{"model.scan_layers": True})
  report = aot_compile.aot_compile(config, "h100-1").report
  assert report["cost_source"] == "unrolled 1- and 2-layer compiles, extrapolated"
  assert 1.0 < report["flops_ratio"] < 1.3
