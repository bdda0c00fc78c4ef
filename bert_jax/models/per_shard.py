"""Runs a per-device kernel under the context mesh with `jax.shard_map`.

Pallas kernels (splash on TPU, flash on GPU and TPU, the Triton layer norm) see only the arrays
of one device, so under a mesh they run per shard: the batch over the mesh axes that the logical
axis rules give ``activation_batch`` and the heads over those of ``activation_heads``, each
only where the axes divide the dimension evenly (otherwise it is replicated). Other dimensions
are never split: attention needs whole key sequences, a norm whole rows.
"""

import math

import flax.linen as nn
import jax
from jax.sharding import PartitionSpec


def mesh_axes_dividing(mesh, axes, size: int):
  """``axes`` if their product divides ``size`` (else None: replicate this dimension)."""
  names = (axes,) if isinstance(axes, str) else tuple(axes or ())
  return axes if names and size % math.prod(mesh.shape[a] for a in names) == 0 else None


def call_per_shard(kernel, args, layouts, out_layout: str):
  """``kernel(*args)``, per shard of the batch and heads when a mesh is set.

  Args:
    kernel: a function of ``args`` returning one array; it sees per-shard arrays.
    args: the arrays.
    layouts: one shape-suffix string per array, e.g. ``"BLHD"`` or ``"BL"``: ``B`` is split
      over the batch axes, ``H`` over the head axes, every other letter is replicated.
    out_layout: the same for the output.

  Returns:
    ``kernel``'s output for the whole arrays.
  """
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty:
    return kernel(*args)
  sizes = {}
  for array, layout in zip(args, layouts):
    sizes.update({letter: array.shape[i] for i, letter in enumerate(layout) if letter in "BH"})
  batch_axes, head_axes = nn.logical_to_mesh_axes(("activation_batch", "activation_heads"))
  axes = {"B": batch_axes, "H": head_axes}
  split = {letter: mesh_axes_dividing(mesh, axes[letter], size) for letter, size in sizes.items()}

  def spec(layout):
    return PartitionSpec(*(split.get(letter) for letter in layout))

  # check_vma=False: the Pallas calls inside carry no varying-axes annotations.
  return jax.shard_map(
    kernel,
    mesh=mesh,
    in_specs=tuple(spec(layout) for layout in layouts),
    out_specs=spec(out_layout),
    check_vma=False,
  )(*args)
