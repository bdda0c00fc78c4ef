"""Device meshes with named axes (data, fsdp, tensor) built from the config's ``mesh`` section."""

import dataclasses
import math
from typing import Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh

from bert_jax.errors import UserInputError

MESH_AXES = ("data", "fsdp", "tensor")


@dataclasses.dataclass(frozen=True)
class MeshConfig:
  """How many devices each mesh axis spans; one axis may be -1, meaning "all the rest"."""
  data: int = -1
  fsdp: int = 1
  tensor: int = 1
  logical_axis_rules: tuple = ()

  @property
  def requested(self) -> tuple:
    return (self.data, self.fsdp, self.tensor)


def resolve_axis_sizes(requested: Sequence[int], num_devices: int) -> tuple:
  """Replaces a single -1 by the number of devices left over and checks the product.

  Args:
    requested: sizes per mesh axis, in `MESH_AXES` order.
    num_devices: devices available.

  Returns:
    Concrete axis sizes whose product is ``num_devices``.
  """
  sizes = list(requested)
  unknown = [i for i, s in enumerate(sizes) if s == -1]
  if len(unknown) > 1:
    raise UserInputError(f"mesh {dict(zip(MESH_AXES, requested))} has more than one -1; "
                         "let at most one axis take the rest of the devices")
  known = math.prod(s for s in sizes if s != -1)
  if any(s == 0 or s < -1 for s in sizes) or num_devices % known:
    raise UserInputError(
        f"mesh {dict(zip(MESH_AXES, requested))} does not divide the {num_devices} devices; "
        "choose axis sizes whose product divides the device count (-1 takes the rest)")
  if unknown:
    sizes[unknown[0]] = num_devices // known
  if math.prod(sizes) != num_devices:
    raise UserInputError(
        f"mesh {dict(zip(MESH_AXES, sizes))} uses {math.prod(sizes)} devices but "
        f"{num_devices} are present; set one axis to -1 or make the product match")
  return tuple(sizes)


def make_mesh(config: MeshConfig, devices=None) -> Mesh:
  """Builds the device mesh with Auto axis types (GSPMD propagation between constraints).

  Args:
    config: axis sizes.
    devices: devices to use (default: all of them, across every process).

  Returns:
    A `Mesh` with axes `MESH_AXES`.
  """
  devices = jax.devices() if devices is None else list(devices)
  sizes = resolve_axis_sizes(config.requested, len(devices))
  if devices == jax.devices():
    return jax.make_mesh(sizes, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))
  return Mesh(np.asarray(devices).reshape(sizes), MESH_AXES,
              axis_types=(AxisType.Auto,) * len(MESH_AXES))
