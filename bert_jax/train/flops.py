"""Model FLOPs per train step and per-device peak FLOP/s, for tokens/s and MFU reporting."""

import time

import jax
import jax.numpy as jnp

from bert_jax.models.config import ModelConfig

# Dense bf16 peaks from the vendors' data sheets, FLOP/s per device as jax enumerates them.
_PEAK_FLOPS_BY_DEVICE_KIND = {
    "TPU v4": 275e12,
    "TPU v5 lite": 197e12,
    "TPU v5e": 197e12,
    "TPU v5": 459e12,
    "TPU v5p": 459e12,
    "TPU v6 lite": 918e12,
    "TPU v6e": 918e12,
    "NVIDIA H100": 989e12,
    "NVIDIA H200": 989e12,
    "NVIDIA A100": 312e12,
}


def train_flops_per_step(config: ModelConfig, batch_size: int, seq_len: int,
                         predictions_per_seq: int) -> float:
  """Matmul FLOPs of one forward+backward pass (3x forward), as MFU conventionally counts.

  Encoder: 2 FLOPs per multiply-add over the layer weights for every token, plus the two
  attention matmuls (QK^T and PV, each 2*L*D per token per layer). The masked-LM head runs only
  at ``predictions_per_seq`` positions per sequence: its transform and the tied vocabulary
  projection are counted there, which is where this code saves work over heads that score
  every position.
  """
  d, f, layers = config.hidden_size, config.intermediate_size, config.num_layers
  tokens = batch_size * seq_len
  per_token_layer = 2 * (4 * d * d + 2 * d * f) + 2 * 2 * seq_len * d
  encoder = tokens * layers * per_token_layer + batch_size * 2 * (d * d + 2 * d)  # + pooler/NSP
  mlm = batch_size * predictions_per_seq * 2 * (d * d + d * config.vocab_size)
  return 3.0 * (encoder + mlm)


def measure_matmul_peak(size: int = 2048, repeats: int = 5) -> float:
  """FLOP/s of a float32 square matmul on device 0: the practical ceiling of a CPU host."""
  x = jnp.ones((size, size), jnp.float32)
  matmul = jax.jit(lambda a: a @ a)
  matmul(x).block_until_ready()
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    matmul(x).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return 2.0 * size**3 / best


def total_peak_flops(configured_per_device: float = 0.0) -> float:
  """Peak FLOP/s of all devices of the run, the denominator of MFU.

  The configured per-device peak if set; else the data-sheet figure for the device kind. On a
  CPU (or an unknown device) the peak is measured once with a float32 matmul, and counted once
  however many fake devices the host is split into, since they share the same cores.
  """
  num_devices = jax.device_count()
  if configured_per_device > 0:
    return configured_per_device * num_devices
  kind = jax.devices()[0].device_kind
  for name in sorted(_PEAK_FLOPS_BY_DEVICE_KIND, key=len, reverse=True):
    if kind.startswith(name):
      return _PEAK_FLOPS_BY_DEVICE_KIND[name] * num_devices
  return measure_matmul_peak() * jax.process_count()
