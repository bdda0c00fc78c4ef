"""Which member task each train step draws its batch from: a pure function of (seed, step).

* ``proportional``: member i with probability proportional to weight_i x n_i (n_i its train
  rows), so every train row is seen about equally often (MT-DNN);
* ``temperature``: proportional to weight_i x n_i^(1/T): T = 1 is proportional, larger T
  flattens toward uniform, so small tasks are seen more often than their size says;
* ``round_robin``: one batch of each member with weight > 0 in turn, in name order.

The random draws come in blocks of `BLOCK` steps, block k from a generator seeded by
``(seed, SALT, k)``, so the task of any step, and how many batches each member has given
before it (its data position when a run resumes), are recomputed from the seed alone.
"""

import numpy as np

BLOCK = 4096
# Keeps the schedule's stream apart from the other streams seeded by the run's seed.
SALT = 0x6D74


def probabilities(sizes, weights, sampling: str, temperature: float) -> np.ndarray:
  """Each member's share of the train steps.

  Args:
    sizes: train rows of each member.
    weights: each member's sampling weight (>= 0, at least one > 0).
    sampling: proportional | temperature | round_robin.
    temperature: T of ``temperature``.

  Returns:
    float64 [M] summing to 1.
  """
  sizes = np.asarray(sizes, np.float64)
  weights = np.asarray(weights, np.float64)
  if sampling == "proportional":
    mass = weights * sizes
  elif sampling == "temperature":
    mass = weights * sizes ** (1.0 / temperature)
  else:
    mass = (weights > 0).astype(np.float64)
  return mass / mass.sum()


class Schedule:
  """The member index of every train step of a run."""

  def __init__(self, shares, sampling: str, seed: int):
    """Args: shares: `probabilities`; sampling: its method; seed: the run's seed."""
    self._shares = np.asarray(shares, np.float64)
    self._cycle = np.flatnonzero(self._shares > 0) if sampling == "round_robin" else None
    self._seed = seed
    self._block_index, self._block = None, None

  def _draw_block(self, k: int) -> np.ndarray:
    rng = np.random.default_rng([self._seed, SALT, k])
    return rng.choice(len(self._shares), size=BLOCK, p=self._shares).astype(np.int32)

  def tasks(self, start: int, stop: int) -> np.ndarray:
    """Member indices of steps ``[start, stop)``, int32."""
    steps = np.arange(start, stop)
    if self._cycle is not None:
      return self._cycle[steps % len(self._cycle)].astype(np.int32)
    blocks = [self._draw_block(k) for k in range(start // BLOCK, -(-stop // BLOCK))]
    drawn = np.concatenate(blocks) if blocks else np.zeros(0, np.int32)
    return drawn[steps - (start // BLOCK) * BLOCK]

  def task_at(self, step: int) -> int:
    """The member index of one step (a block is drawn once and reused)."""
    if self._cycle is not None:
      return int(self._cycle[step % len(self._cycle)])
    if step // BLOCK != self._block_index:
      self._block_index, self._block = step // BLOCK, self._draw_block(step // BLOCK)
    return int(self._block[step % BLOCK])

  def counts_before(self, step: int) -> np.ndarray:
    """Batches each member gave in steps ``[0, step)``, int64 [M]."""
    return np.bincount(self.tasks(0, step), minlength=len(self._shares))
