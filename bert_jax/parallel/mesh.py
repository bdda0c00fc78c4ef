"""Device meshes with named axes (data, fsdp, tensor) built from the config's ``mesh`` section.

Each mesh axis is the product of an in-slice (ICI) part, ``mesh.data/fsdp/tensor``, and an
across-slice (DCN) part, ``mesh.dcn_data/dcn_fsdp/dcn_tensor``. Along an axis the slice index
varies slowest, so collectives over the in-slice part stay on the fast interconnect.
"""

import dataclasses
import math
from collections.abc import Sequence

import jax
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import AxisType, Mesh

from bert_jax import names
from bert_jax.config_fields import option
from bert_jax.errors import UserInputError

MESH_AXES = names.MESH_AXES
DCN_AXES = tuple(f"dcn_{axis}" for axis in MESH_AXES)
_DATA_FSDP = (names.DATA, names.FSDP)

# Logical axis -> mesh axes. Params: FSDP shards the embed dimension, tensor parallelism the
# heads / mlp / vocab dimensions (Megatron style). Activations: batch over data + fsdp.
DEFAULT_LOGICAL_AXIS_RULES = (
  (names.ACTIVATION_BATCH, _DATA_FSDP),
  (names.ACTIVATION_LENGTH, None),
  (names.ACTIVATION_EMBED, None),
  (names.ACTIVATION_HEADS, names.TENSOR),
  (names.ACTIVATION_MLP, names.TENSOR),
  (names.EMBED, names.FSDP),
  (names.VOCAB, names.TENSOR),
  (names.HEADS, names.TENSOR),
  (names.MLP, names.TENSOR),
  (names.KV, None),
  (names.NORM, None),
  (names.POSITIONS, None),
  (names.TOKEN_TYPES, None),
  (names.CLASSES, None),
  (names.LAYERS, None),
)


@dataclasses.dataclass(frozen=True)
class MeshConfig:
  """Devices per mesh axis within a slice (ici) and slices per mesh axis (dcn).

  At each level one axis may be -1, meaning "all the rest" (of the devices of a slice, or of
  the slices). ``dcn_data`` defaults to -1, so a multi-slice run is data-parallel across
  slices without further settings and a single slice is unaffected.
  """

  data: int = option(-1, help="Data-parallel ways within a slice; -1 = the devices left over.")
  fsdp: int = option(1, help="Fully-sharded data-parallel ways (params sharded on embed).")
  tensor: int = option(1, help="Tensor-parallel ways (heads, mlp, vocab).")
  dcn_data: int = option(
    -1, help="Data parallelism across slices (multi-slice TPU); -1 = the slices left over."
  )
  dcn_fsdp: int = option(1, help="FSDP ways across slices.")
  dcn_tensor: int = option(1, help="Tensor-parallel ways across slices.")
  logical_axis_rules: tuple = option(
    DEFAULT_LOGICAL_AXIS_RULES, help="Logical axis -> mesh axes (None = replicated)."
  )

  def __post_init__(self):
    for axes, sizes in ((MESH_AXES, self.ici), (DCN_AXES, self.dcn)):
      bad = [f"mesh.{n}={s}" for n, s in zip(axes, sizes) if s == 0 or s < -1]
      if bad:
        raise UserInputError(
          f"{', '.join(bad)}: mesh axis sizes must be >= 1, or -1 for the rest of the devices"
        )
      if sizes.count(-1) > 1:
        raise UserInputError(
          f"{_shown(axes, sizes)} has more than one -1; let at most one axis take the rest"
        )

  @property
  def ici(self) -> tuple:
    """Requested devices per axis within one slice, in `MESH_AXES` order."""
    return (self.data, self.fsdp, self.tensor)

  @property
  def dcn(self) -> tuple:
    """Requested slices per axis, in `MESH_AXES` order."""
    return (self.dcn_data, self.dcn_fsdp, self.dcn_tensor)


def _shown(names, sizes) -> str:
  return "mesh " + " ".join(f"{n}={s}" for n, s in zip(names, sizes))


def resolve_axis_sizes(
  requested: Sequence[int], count: int, names=MESH_AXES, what: str = "devices"
) -> tuple:
  """Replaces a single -1 by what is left of ``count`` and checks the product.

  Args:
    requested: sizes per axis; at most one -1.
    count: devices (or slices) to cover.
    names: axis names, for the error message.
    what: what ``count`` counts, for the error message.

  Returns:
    Concrete axis sizes whose product is ``count``.

  Raises:
    UserInputError: naming the valid axis sizes (the divisors of ``count``).
  """
  sizes = list(requested)
  choices = ", ".join(str(d) for d in range(1, count + 1) if count % d == 0)
  known = math.prod(s for s in sizes if s != -1)
  if count % known:
    raise UserInputError(
      f"{_shown(names, requested)} does not divide the {count} {what}; valid axis sizes: "
      f"{choices}, with product {count} (-1 takes the rest)"
    )
  if -1 in sizes:
    sizes[sizes.index(-1)] = count // known
  if math.prod(sizes) != count:
    raise UserInputError(
      f"{_shown(names, requested)} uses {math.prod(sizes)} of the {count} {what}; make the "
      f"product {count} from the valid axis sizes {choices}, or set one axis to -1 for the rest"
    )
  return tuple(sizes)


def _slice_count(devices) -> int | None:
  """Slices the devices come from; None for devices without slices (CPU, GPU)."""
  if not hasattr(devices[0], "slice_index"):
    return None
  return len({d.slice_index for d in devices})


def axis_sizes(config: MeshConfig, devices) -> tuple:
  """(ici sizes, dcn sizes) for ``devices``, -1s resolved.

  Devices without slices (CPU, GPU) have none to go by: an explicit dcn size there splits the
  devices into that many groups of consecutive devices standing in for slices, so multi-slice
  meshes can be tested on one host.
  """
  slices = _slice_count(devices)
  if slices is None:
    slices = math.prod(s for s in config.dcn if s != -1)
  if len(devices) % slices:
    raise UserInputError(
      f"{_shown(DCN_AXES, config.dcn)} asks for {slices} slices, which does not divide the "
      f"{len(devices)} devices; valid slice counts: "
      + ", ".join(str(d) for d in range(1, len(devices) + 1) if len(devices) % d == 0)
    )
  dcn = resolve_axis_sizes(config.dcn, slices, DCN_AXES, "slices")
  ici = resolve_axis_sizes(
    config.ici,
    len(devices) // slices,
    MESH_AXES,
    "devices" if slices == 1 else "devices of each slice",
  )
  return ici, dcn


def _stand_in_hybrid_mesh(ici, dcn, devices) -> np.ndarray:
  """Consecutive device groups as slices, laid out as `create_hybrid_device_mesh` lays out real
  slices: along every axis the slice index varies slowest."""
  grouped = np.asarray(devices).reshape(tuple(dcn) + tuple(ici))
  interleaved = [i for pair in zip(range(len(ici)), range(len(ici), 2 * len(ici))) for i in pair]
  return grouped.transpose(interleaved).reshape([d * i for d, i in zip(dcn, ici)])


def make_mesh(config: MeshConfig, devices=None) -> Mesh:
  """Builds the device mesh with Auto axis types (GSPMD propagation between constraints).

  Args:
    config: axis sizes within and across slices.
    devices: devices to use (default: all of them, across every process); may be the
      devices of a TPU topology description, for ahead-of-time compilation.

  Returns:
    A `Mesh` with axes `MESH_AXES`, each of size ici x dcn.
  """
  devices = jax.devices() if devices is None else list(devices)
  ici, dcn = axis_sizes(config, devices)
  if math.prod(dcn) == 1:
    array = mesh_utils.create_device_mesh(ici, devices, allow_split_physical_axes=True)
  elif _slice_count(devices) is None:
    array = _stand_in_hybrid_mesh(ici, dcn, devices)
  else:
    array = mesh_utils.create_hybrid_device_mesh(ici, dcn, devices, allow_split_physical_axes=True)
  return Mesh(array, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))
