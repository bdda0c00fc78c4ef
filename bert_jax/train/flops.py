"""Model FLOPs per train step and per-device peak FLOP/s, for tokens/s and MFU reporting."""

import functools
import math
import time
from collections.abc import Iterable

import jax
import jax.numpy as jnp

from bert_jax.models import families
from bert_jax.models.config import ModelConfig
from bert_jax.tasks.interface import Task

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


def train_flops_per_step(
  config: ModelConfig, batch_size: int, seq_len: int, predictions_per_seq: int
) -> float:
  """Matmul FLOPs of one forward+backward pass (3x forward), as MFU conventionally counts.

  The family's formula (`Family.train_flops`, `models/flops.py`): the encoder's weights and
  attention matmuls for every token, and the masked-LM head only at ``predictions_per_seq``
  positions per sequence.
  """
  family = families.get(config.family)
  return family.train_flops(config, batch_size, seq_len, predictions_per_seq)


def train_flops_for_batch(config: ModelConfig, example_batch) -> float:
  """`train_flops_per_step` for a task's global batch, read off its schema.

    Every row of ``input_ids`` [..., L] is one encoded sequence (multiple choice encodes
    [B, C, L]: B*C of them); masked-LM positions count only where the batch has them (every
  position for the causal LM). Fine-tuning
    heads (one small dense layer) are counted as the pooler-sized term.

    Args:
      config: the model configuration.
      example_batch: the task's ``example_batch(global_batch_size)`` (numpy arrays).
  """
  input_ids = example_batch["input_ids"]
  positions = example_batch.get("masked_lm_positions")
  if positions is None and "document_ids" in example_batch:
    positions = input_ids  # A causal LM (data.objective='clm') predicts at every position.
  return train_flops_per_step(
    config,
    math.prod(input_ids.shape[:-1]),
    input_ids.shape[-1],
    0 if positions is None else positions.shape[-1],
  )


def train_flops_for_task(task: Task, config: ModelConfig, example_batch) -> float:
  """`train_flops_for_batch` of ``task``'s train step.

  A distillation task's step also runs its frozen teacher (``task.teacher.model``) forward
  over the batch: a third of the teacher's train FLOPs (no backward pass).
  """
  flops = train_flops_for_batch(config, example_batch)
  if task.teacher is not None:
    flops += train_flops_for_batch(task.teacher.model, example_batch) / 3.0
  return flops


@functools.cache
def measure_matmul_peak(size: int = 2048, repeats: int = 5) -> float:
  """FLOP/s of a float32 square matmul on device 0: the practical ceiling of a CPU host.

  Measured once per process (several seconds on a busy 2-core host); later runs reuse it.
  """
  x = jnp.ones((size, size), jnp.float32)
  matmul = jax.jit(lambda a: a @ a)
  matmul(x).block_until_ready()
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    matmul(x).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return 2.0 * size**3 / best


def total_peak_flops(
  configured_per_device: float = 0.0, devices: Iterable[jax.Device] | None = None
) -> float:
  """Peak FLOP/s of all devices of the run, the denominator of MFU.

  The configured per-device peak if set; else the data-sheet figure for the device kind. On a
  CPU (or an unknown device) the peak is measured once with a float32 matmul, and counted once
  however many fake devices the host is split into, since they share the same cores.

  Args:
    configured_per_device: the per-device peak to use; 0.0 for the device kind's.
    devices: the run's devices (default: every device of every process).
  """
  devices = jax.devices() if devices is None else list(devices)
  num_devices = len(devices)
  if configured_per_device > 0:
    return configured_per_device * num_devices
  per_device = device_kind_peak_flops(devices[0].device_kind)
  if per_device:
    return per_device * num_devices
  return measure_matmul_peak() * jax.process_count()


def device_kind_peak_flops(kind: str) -> float:
  """Data-sheet dense bf16 FLOP/s of one device of ``kind`` (e.g. "TPU v4"); 0.0 if unknown."""
  for name in sorted(_PEAK_FLOPS_BY_DEVICE_KIND, key=len, reverse=True):
    if kind.startswith(name):
      return _PEAK_FLOPS_BY_DEVICE_KIND[name]
  return 0.0
