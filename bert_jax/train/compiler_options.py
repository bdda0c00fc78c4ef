"""XLA options the train step and the state's initialisation are compiled with on each platform.

GPU: XLA's Triton GEMM fusions off, so every matrix product is a cuBLAS call. With them on,
XLA fuses a product's elementwise producers into a Triton GEMM; where autotuning then picks
cuBLAS for that product, the producers come back out as kernels of their own (BERT-base's 24
dropout-scale multiplies, a pass over [B, L, 768] each, 0.75 ms of the step), and no bias lands
in a cuBLAS epilogue. On an H200 (JAX 0.11.2, BERT-base, bf16, batch 256 × 128, dense
attention) the step's device time fell from 55.0 to 53.6 ms with them off: 40 bias adds
became cuBLAS epilogues, the 24 multiplies went, and the GEMMs took 26.4 instead of 28.4 ms
(`bench/benchmark_variants --variant=cublas:xla.xla_gpu_enable_triton_gemm=false`, 2026-11-28).

CPU and TPU: XLA's defaults for the train step.

Initialisation, CPU: LLVM at level 0 without its expensive passes. The program runs once, so
its compile is all it costs: BERT-sized random initialisers (a threefry hash and an inverse
error function per parameter tensor) took 4.5 s to compile optimised and 2.1 s at level 0 for
ELECTRA-tiny on a 2-core host, with the same 200-step metrics to 1e-8. Other platforms keep
XLA's defaults: TPU compilers read no LLVM level, and on GPU nothing was measured.
"""

# XLA options of the GPU train step (see above).
GPU_TRAIN_STEP = {"xla_gpu_enable_triton_gemm": False}


def train_step(platform: str) -> dict | None:
  """The options `jax.jit` compiles the train step with on ``platform`` ("cpu", "gpu" or
  "tpu"; a device's ``platform``, which may also say "cuda"), or None for XLA's defaults."""
  return dict(GPU_TRAIN_STEP) if platform in ("gpu", "cuda") else None


# XLA options of the CPU initialisation (see above).
CPU_INIT = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def init(platform: str) -> dict | None:
  """The options `jax.jit` compiles the train state's initialisation with on ``platform``, or
  None for XLA's defaults."""
  return dict(CPU_INIT) if platform == "cpu" else None
