"""XLNet's permutation language model inputs: a sampled factorisation order per row.

Partial prediction (Yang et al. 2019, sec. 2.3): only the last tokens of each order are
predicted. Here the predicted tokens are the positions the pretraining pipeline chose
(``masked_lm_positions`` with a positive weight, about 1/K of the tokens); every other token
comes before all of them in the order (XLNet's "non-target tokens see each other"), and the
targets follow in a uniformly random order. Token i may see token j iff j comes strictly
before i in the order (content stream: or j == i).
"""

import jax
import jax.numpy as jnp


def factorisation_ranks(target_BL, rng):
  """Each token's place in a sampled order: -1 for every non-target, a random permutation of
  0 .. (number of targets - 1) over a row's targets.

  Args:
    target_BL: bool, True at the positions to predict.
    rng: PRNG key.

  Returns:
    int32 [B, L].
  """
  noise_BL = jax.random.uniform(rng, target_BL.shape)
  # Targets sorted by their noise get ranks 0, 1, ...; non-targets sort last and are reset.
  keys_BL = jnp.where(target_BL, noise_BL, 2.0)
  order_BL = jnp.argsort(keys_BL, axis=1)
  ranks_BL = jnp.argsort(order_BL, axis=1).astype(jnp.int32)
  return jnp.where(target_BL, ranks_BL, -1)


def permutation_mask(ranks_BL, target_BL):
  """XLNet's ``perm_mask`` [B, L, L] (float32, 1 = token i may not see token j).

  i may not see j when j comes later in the order, and a target may not see itself (the
  query stream must predict it without its content).
  """
  later_BLL = ranks_BL[:, None, :] > ranks_BL[:, :, None]
  itself_BLL = jnp.eye(ranks_BL.shape[1], dtype=bool)[None] & target_BL[:, :, None]
  return (later_BLL | itself_BLL).astype(jnp.float32)


def target_mapping(positions_BP, length: int):
  """One-hot [B, P, L] (float32): prediction p is of the token at ``positions_BP[b, p]``."""
  return jax.nn.one_hot(positions_BP, length, dtype=jnp.float32)


def targets_from_positions(positions_BP, weights_BP, length: int):
  """bool [B, L]: the positions that have a positive weight (padding predictions are not)."""
  onehot_BPL = target_mapping(positions_BP, length) * (weights_BP > 0)[:, :, None]
  return jnp.sum(onehot_BPL, axis=1) > 0
