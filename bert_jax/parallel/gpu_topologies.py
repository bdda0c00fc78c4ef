"""NVIDIA GPU machines for compiling ahead of time on a host without a GPU (tools/aot_compile).

XLA compiles for a GPU it is told about instead of one it queries: a target config (the
device's multiprocessors, memory, caches and compute capability) and a topology of hosts and
GPUs per host. `topology_devices` needs jax's CUDA plugin (extra ``cuda``), not a GPU or a
driver; the rest is plain data. Without a device XLA cannot autotune, so its GEMM tilings are
its defaults: memory and FLOPs are what a GPU would compile, kernel speeds are not.
"""

import dataclasses
import importlib.util
import os
import re

from bert_jax.errors import UserInputError

_GIB = 2**30
GPUS_PER_HOST = 8

# The CUDA plugin jax 0.10.2 pairs with (its "cuda13" extra).
_PLUGIN = "jax_plugins.xla_cuda13"

# JAX lets one program allocate this fraction of a GPU's memory by default
# (XLA_PYTHON_CLIENT_MEM_FRACTION).
_JAX_MEMORY_FRACTION = 0.75


@dataclasses.dataclass(frozen=True)
class Gpu:
  """One GPU model, with the data-sheet figures XLA's target config and the report need.

  ``memory_bytes`` is what the driver reports; a JAX program gets `usable_bytes` of it.
  """

  device_kind: str  # As jax names the device.
  memory_bytes: int
  hbm_bandwidth: float  # Bytes/s.
  multiprocessors: int
  l2_bytes: int
  clock_ghz: float
  compute_capability: tuple

  @property
  def clock_hz(self) -> None:
    """None: XLA's GPU programs carry no per-op cycle estimates to turn into time."""
    return None

  @property
  def hbm_bytes(self) -> int:
    """Memory a JAX program may use on the GPU with JAX's default memory fraction."""
    return int(self.memory_bytes * _JAX_MEMORY_FRACTION)

  def target_config(self) -> str:
    """The device as XLA's ``GpuTargetConfigProto`` text.

    Hopper's per-multiprocessor limits (228 KiB of shared memory, 64k registers, 2048
    threads) are the same on every GPU here.
    """
    major, minor = self.compute_capability
    return (
      "gpu_device_info {"
      " threads_per_block_limit: 1024 threads_per_warp: 32"
      " shared_memory_per_block: 49152 shared_memory_per_core: 233472"
      " shared_memory_per_block_optin: 232448"
      " threads_per_core_limit: 2048 fpus_per_core: 128"
      " registers_per_core_limit: 65536 registers_per_block_limit: 65536"
      " block_dim_limit_x: 2147483647 block_dim_limit_y: 65535 block_dim_limit_z: 65535"
      f" core_count: {self.multiprocessors}"
      f" memory_bandwidth: {int(self.hbm_bandwidth)}"
      f" l2_cache_size: {self.l2_bytes}"
      f" clock_rate_ghz: {self.clock_ghz}"
      f" device_memory_size: {self.memory_bytes}"
      f" cuda_compute_capability {{ major: {major} minor: {minor} }}"
      " }"
      ' platform_name: "CUDA"'
      " dnn_version_info { major: 9 minor: 10 }"
      " runtime_version { major: 13 minor: 0 }"
      f' device_description_str: "{self.device_kind}"'
    )


# Data sheets (SXM parts): H100 80 GB HBM3 at 3.35 TB/s, H200 141 GB HBM3e at 4.8 TB/s; both
# 132 multiprocessors at up to 1.98 GHz with 50 MiB of L2. Memory as their drivers report it.
GPUS = {
  "h100": Gpu("NVIDIA H100 80GB HBM3", 84_942_979_072, 3.35e12, 132, 50 * 2**20, 1.98, (9, 0)),
  "h200": Gpu("NVIDIA H200", 151_397_597_184, 4.8e12, 132, 50 * 2**20, 1.98, (9, 0)),
}

_NAME = re.compile(r"^(?P<gpu>[a-z]\d+)-(?P<count>\d+)$")


@dataclasses.dataclass(frozen=True)
class GpuTopology:
  """``count`` GPUs of one model, 8 to a host (fewer on a single host)."""

  name: str
  chip: Gpu  # Named as a TPU topology's chip, so tools/aot_compile reads both alike.
  count: int

  @property
  def hosts(self) -> int:
    return max(1, self.count // GPUS_PER_HOST)


def is_gpu_topology(name: str) -> bool:
  """Whether ``name`` names GPUs ("h100-8", or an unknown "a100-8") rather than a TPU slice
  (TPU generations start with "v")."""
  return bool(_NAME.match(name)) and not name.startswith("v")


def get_topology(name: str) -> GpuTopology:
  """``<gpu>-<count>`` (e.g. "h100-1", "h200-16") as a topology; UserInputError otherwise."""
  match = _NAME.match(name)
  if not match or match.group("gpu") not in GPUS:
    raise UserInputError(
      f"unknown GPU topology {name!r}; use <gpu>-<count> with gpu one of {', '.join(GPUS)}, "
      "e.g. h100-1 or h100-8"
    )
  count = int(match.group("count"))
  if count < 1 or (count > GPUS_PER_HOST and count % GPUS_PER_HOST):
    raise UserInputError(
      f"GPU topology {name!r}: {count} GPUs; use 1 to {GPUS_PER_HOST} on one host or a "
      f"multiple of {GPUS_PER_HOST} (hosts of {GPUS_PER_HOST})"
    )
  return GpuTopology(name, GPUS[match.group("gpu")], count)


def plugin_installed() -> bool:
  """Whether jax's CUDA plugin is importable (its namespace package may be missing whole)."""
  try:
    return importlib.util.find_spec(_PLUGIN) is not None
  except ModuleNotFoundError:
    return False


def topology_devices(topology: GpuTopology) -> list:
  """Compile-only devices for ``topology``; needs jax's CUDA plugin and JAX_PLATFORMS=cpu
  (ordinary computation stays on the host, and the plugin is not asked for a GPU)."""
  if not plugin_installed():
    raise UserInputError(
      "jax's CUDA plugin is not installed, so GPU programs cannot be compiled here; "
      "run pip install -e '.[cuda]'"
    )
  if os.environ.get("JAX_PLATFORMS", "") != "cpu":
    raise UserInputError(
      f"compiling for {topology.name} without a GPU needs JAX_PLATFORMS=cpu (it is "
      f"{os.environ.get('JAX_PLATFORMS')!r}); the CUDA plugin only compiles"
    )
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top

  per_host = topology.count // topology.hosts
  return list(
    topologies.get_topology_desc(
      topology_name=topology.name,
      platform="cuda",
      target_config=topology.chip.target_config(),
      topology=f"1x{topology.hosts}x{per_host}",
    ).devices
  )
