"""The cyclic ring of LSH chunks: slots padded with the window's reach on either side, and back.

`lsh_chunks` lays all hash rounds' sorted slots end to end as one ring; a chunk's window may
reach past either end, so queries and values are padded cyclically once (`pad_ring`) and the
gradients of the copies are summed back onto their slots (`fold_ring`, its transpose).
"""

import jax
import jax.numpy as jnp


def pad_ring(x_BHS, spec):
  """x with the slots of the chunks before its first and after its last chunk (cyclically) added.

  Row p of the result is slot (p - front) mod S, front = n_chunks_before * chunk_len; built
  from whole copies of x and one slice, which XLA fuses into a single copy.
  """
  n_slots = x_BHS.shape[2]
  front = spec.n_chunks_before * spec.chunk_len
  back = spec.n_chunks_after * spec.chunk_len
  laps_front, laps_back = -(-front // n_slots), -(-back // n_slots)
  tiled_BHT = jnp.concatenate([x_BHS] * (laps_front + 1 + laps_back), axis=2)
  start = laps_front * n_slots - front
  return jax.lax.slice_in_dim(tiled_BHT, start, start + front + n_slots + back, axis=2)


def fold_ring(x_BHP, n_slots, spec):
  """Transpose of `pad_ring`: sums the rows that are copies of one slot."""
  front = spec.n_chunks_before * spec.chunk_len
  laps_front = -(-front // n_slots)
  start = laps_front * n_slots - front
  n_laps = -(-(start + x_BHP.shape[2]) // n_slots)
  pad = [(0, 0)] * x_BHP.ndim
  pad[2] = (start, n_laps * n_slots - start - x_BHP.shape[2])
  laps_BHLS = jnp.pad(x_BHP, pad).reshape(x_BHP.shape[:2] + (n_laps, n_slots) + x_BHP.shape[3:])
  return sum(laps_BHLS[:, :, lap] for lap in range(1, n_laps)) + laps_BHLS[:, :, 0]
