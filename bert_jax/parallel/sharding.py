"""Logical axis names -> mesh shardings, and host-local batches -> global arrays.

Everything that turns per-host data into global `jax.Array`s lives here, so the trainer never
touches `jax.process_index()` itself.
"""

import math

import flax.linen as nn
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

BATCH_AXES = ("data", "fsdp")


def _divisible_spec(spec: PartitionSpec, shape, mesh: Mesh) -> PartitionSpec:
  """Drops mesh axes from dimensions they do not divide (e.g. a 30522-word vocab on 4 ways).

  Replicating such a dimension costs memory but keeps every model size shardable; the rules
  stay the same for all sizes.
  """
  entries = []
  for dim, axes in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec))):
    names = (axes,) if isinstance(axes, str) else tuple(axes or ())
    kept = tuple(a for a in names if mesh.shape[a] > 1)
    if kept and dim % math.prod(mesh.shape[a] for a in kept):
      kept = ()
    entries.append(kept[0] if len(kept) == 1 else (kept or None))
  return PartitionSpec(*entries)


def strip_boxes(tree):
  """Removes logical-partitioning boxes without applying their constraints (unlike unbox)."""
  return jax.tree.map(
    lambda x: x.value if isinstance(x, nn.Partitioned) else x,
    tree,
    is_leaf=lambda x: isinstance(x, nn.Partitioned),
  )


def logical_shardings(abstract_tree, mesh: Mesh, rules):
  """Shardings for a tree of (boxed, logically partitioned) abstract values.

  Args:
    abstract_tree: output of `jax.eval_shape` on an init function; leaves may be
      `nn.LogicallyPartitioned` boxes (unannotated leaves are replicated).
    mesh: the device mesh.
    rules: (logical axis, mesh axis or axes or None) pairs.

  Returns:
    A tree of `NamedSharding`s with the structure of the unboxed tree.
  """
  specs = nn.get_partition_spec(abstract_tree)
  mesh_specs = nn.logical_to_mesh(specs, rules)
  unboxed = strip_boxes(abstract_tree)
  return jax.tree.map(
    lambda spec, leaf: NamedSharding(mesh, _divisible_spec(spec, leaf.shape, mesh)),
    mesh_specs,
    unboxed,
    is_leaf=lambda x: isinstance(x, PartitionSpec),
  )


def batch_sharding(mesh: Mesh, ndim: int) -> NamedSharding:
  """Leading (batch) dimension over the data-parallel axes, the rest replicated."""
  return NamedSharding(mesh, PartitionSpec(BATCH_AXES, *([None] * (ndim - 1))))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, PartitionSpec())


def host_batch_to_global(host_batch, mesh: Mesh):
  """Assembles each process's slice of the global batch into global `jax.Array`s.

  Process p holds rows [p*b, (p+1)*b) of the global batch (the data pipeline guarantees it),
  and the global batch dimension is sharded over the data-parallel mesh axes.

  Args:
    host_batch: dict of numpy arrays, leading dimension = global batch / process count.
    mesh: the device mesh.

  Returns:
    Dict of global arrays with leading dimension = global batch.
  """

  def to_global(x):
    x = np.asarray(x)
    return jax.make_array_from_process_local_data(batch_sharding(mesh, x.ndim), x)

  return {name: to_global(x) for name, x in host_batch.items()}
