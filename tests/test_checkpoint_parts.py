"""Which replicated arrays a checkpoint splits among their replicas (checkpointing.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from bert_jax.train import checkpointing


def test_only_arrays_whose_parts_reach_the_floor_are_split_and_both_restore(tmp_path, monkeypatch):
  replicated = NamedSharding(jax.make_mesh((8,), ("data",)), P())
  floor = checkpointing.MIN_BYTES_PER_REPLICA_PART
  state = jax.device_put(
    {
      "small": jnp.arange(floor // 4, dtype=jnp.float32),  # 8 parts of floor / 8 bytes.
      "large": jnp.arange(2 * floor, dtype=jnp.float32),  # 8 parts of floor bytes.
    },
    replicated,
  )
  sliced = []
  slice_in_dim = jax.lax.slice_in_dim

  def spy(operand, *args, **kwargs):
    sliced.append(operand.shape)
    return slice_in_dim(operand, *args, **kwargs)

  monkeypatch.setattr(jax.lax, "slice_in_dim", spy)
  checkpointer = checkpointing.Checkpointer(str(tmp_path))
  checkpointer.save(1, state, jax.random.key(0), data_position=0)
  checkpointer.close()
  monkeypatch.undo()

  # Each of the 8 replicas of the large array wrote its part; the small one went whole.
  assert sliced == [(2 * floor,)] * 8
  target = jax.tree.map(
    lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=replicated), state
  )
  with ocp.StandardCheckpointer() as reader:
    restored = reader.restore(tmp_path / "checkpoints" / "1" / "state", target)
  jax.tree.map(np.testing.assert_array_equal, restored, state)
