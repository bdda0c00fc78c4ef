"""Cloud TPU slice names -> libtpu topology descriptions and per-chip specs, for compiling ahead
of time on a host without TPUs (tools/aot_compile.py).

`topology_devices` needs the `libtpu` wheel (extra ``tpu``); the rest is plain data.
"""

import dataclasses
import importlib.util
import os

from bert_jax.errors import UserInputError

_GIB = 2**30


@dataclasses.dataclass(frozen=True)
class Chip:
  """One TPU chip as jax sees it (one device; v4 and v5p fuse two TensorCores, "megacore").

  ``hbm_bytes`` is the HBM the compiler lets a program use (libtpu 0.0.42 names it in its
  out-of-memory errors), a little under the data-sheet size. Peak FLOP/s per device kind live
  in `bert_jax.train.flops`, with the other accelerators'.
  """

  device_kind: str
  hbm_bytes: int
  hbm_bandwidth: float  # Bytes/s (data sheet).
  # TensorCore clock, Hz: turns the compiler's estimated cycles into time; None if unknown.
  clock_hz: float | None


# Data sheets: v4 32 GiB at 1.2 TB/s; v5e 16 GiB at 819 GB/s; v5p 95 GB at 2.765 TB/s; v6e
# 32 GiB at 1.64 TB/s. Clocks: v4 1050 MHz (Jouppi et al. 2023); v5e and v5p the peak bf16
# FLOP/s over four 128x128 matrix units per TensorCore (197e12 / 131072 and 459e12 / 262144
# for two cores), which libtpu's estimate of an 8192^3 bf16 matmul matches within 12% on
# v4, v5e and v5p. v6e's matrix units are not published in a form that gives its clock.
CHIPS = {
  "v4": Chip("TPU v4", int(30.75 * _GIB), 1.2e12, 1.05e9),
  "v5e": Chip("TPU v5 lite", int(15.75 * _GIB), 819e9, 1.5e9),
  "v5p": Chip("TPU v5", int(95.74 * _GIB), 2.765e12, 1.75e9),
  "v6e": Chip("TPU v6 lite", int(31.25 * _GIB), 1.64e12, None),
}


@dataclasses.dataclass(frozen=True)
class Topology:
  """A slice type (e.g. v4-32) in the terms `jax.experimental.topologies` takes."""

  name: str
  generation: str  # A key of CHIPS.
  topology_name: str  # libtpu's "<chip>:<physical shape>", e.g. "v4:2x2x4".
  chip_config_name: str  # "megacore" (v4, v5p: one device per chip) or "default".
  chips_per_host_bounds: tuple

  @property
  def chip(self) -> Chip:
    return CHIPS[self.generation]


def _table():
  """Slice name -> Topology. v4 and v5p names count TensorCores (2 per chip), v5e and v6e chips;
  every host holds 2x2 chips, except single-host v5e/v6e slices of 1 or 8 chips."""
  cubes = {
    8: "2x2x1",
    16: "2x2x2",
    32: "2x2x4",
    64: "2x4x4",
    128: "4x4x4",
    256: "4x4x8",
    512: "4x8x8",
  }
  planes = {
    1: "1x1",
    4: "2x2",
    8: "2x4",
    16: "4x4",
    32: "4x8",
    64: "8x8",
    128: "8x16",
    256: "16x16",
  }
  host_of_plane = {1: (1, 1, 1), 8: (2, 4, 1)}
  table = {}
  for generation, prefix in (("v4", "v4"), ("v5p", "v5")):
    for cores, shape in cubes.items():
      name = f"{generation}-{cores}"
      table[name] = Topology(name, generation, f"{prefix}:{shape}", "megacore", (2, 2, 1))
  for generation in ("v5e", "v6e"):
    for chips, shape in planes.items():
      name = f"{generation}-{chips}"
      table[name] = Topology(
        name, generation, f"{generation}:{shape}", "default", host_of_plane.get(chips, (2, 2, 1))
      )
  return table


TOPOLOGIES = _table()

# Keep libtpu from looking for TPU hardware and a GCE metadata server that a CPU host lacks, and
# from refusing to load while another process (a test, another compile) holds it.
_QUIET_LIBTPU_ENV = {
  "TPU_SKIP_MDS_QUERY": "1",
  "TPU_ACCELERATOR_TYPE": "v5litepod-16",
  "TPU_WORKER_HOSTNAMES": "localhost",
  "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
}


def get_topology(name: str) -> Topology:
  """The slice type called ``name`` (e.g. "v4-32"); UserInputError listing the known ones."""
  if name not in TOPOLOGIES:
    raise UserInputError(
      f"unknown TPU topology {name!r}; valid topologies: {', '.join(TOPOLOGIES)}"
    )
  return TOPOLOGIES[name]


def topology_devices(topology: Topology, num_slices: int = 1) -> list:
  """Compile-only devices of ``num_slices`` slices of ``topology`` (they carry slice_index).

  Needs libtpu; ordinary computation stays on the host's own backend (JAX_PLATFORMS=cpu).
  """
  if importlib.util.find_spec("libtpu") is None:
    raise UserInputError(
      "libtpu is not installed, so TPU programs cannot be compiled here; "
      "run pip install -e '.[tpu]'"
    )
  if num_slices < 1:
    raise UserInputError(f"num_slices={num_slices} must be at least 1")
  for key, value in _QUIET_LIBTPU_ENV.items():
    os.environ.setdefault(key, value)
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top

  return list(
    topologies.get_topology_desc(
      platform="tpu",
      topology_name=topology.topology_name,
      chip_config_name=topology.chip_config_name,
      chips_per_host_bounds=topology.chips_per_host_bounds,
      num_slices=num_slices,
    ).devices
  )
