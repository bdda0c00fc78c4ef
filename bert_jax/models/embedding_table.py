"""Embedding lookup whose gradient a GPU sums quickly and in float32.

`flax.linen.Embed` casts its float32 table to the compute dtype and then gathers, so in a bf16
run the backward pass scatter-adds each token's gradient into a bf16 table. GPUs have no bf16
atomic add: XLA emulates it with compare-and-swap loops, which collide when many tokens share a
row. BERT-base's token-type table has 2 rows and 32,768 tokens a step (batch 256 x 128): that one
scatter took 50.8 ms of a 118 ms step on an H200, and summing 16,384 gradients in bf16 also
rounds most of them away. Here the lookup reads the float32 table and casts the rows it returns,
so the scatter runs in float32 (native atomics, float32 sums); a table of at most
`SELECT_MAX_ROWS` rows is read by selecting between its rows instead, whose gradient is a
reduction over the tokens: no scatter and no atomics at all.

The forward values are the same as `flax.linen.Embed`'s (a cast commutes with a gather and a
select), and so is the parameter (``embedding``, [rows, features]).
"""

from collections.abc import Callable

import flax.linen as nn
import jax.numpy as jnp

# Tables this small (token types, languages) are read by selecting between rows.
SELECT_MAX_ROWS = 16


class EmbeddingTable(nn.Module):
  """A float32 table [num_embeddings, features] looked up by integer ids.

  Attributes:
    num_embeddings: rows.
    features: width of a row.
    dtype: dtype of the returned rows (the compute dtype).
    embedding_init: initialiser of the table.
  """

  num_embeddings: int
  features: int
  dtype: jnp.dtype
  embedding_init: Callable

  def setup(self):
    self.embedding = self.param(
      "embedding", self.embedding_init, (self.num_embeddings, self.features), jnp.float32
    )

  def __call__(self, ids):
    """Rows of the table for integer ``ids`` [...]: [..., features] in ``dtype``.

    Ids outside the table give zeros for a table of at most `SELECT_MAX_ROWS` rows and NaN
    rows otherwise (`jnp.take`'s fill).
    """
    if not jnp.issubdtype(ids.dtype, jnp.integer):
      raise ValueError(f"embedding ids must be integers, got {ids.dtype}")
    table = self.embedding
    if self.num_embeddings <= SELECT_MAX_ROWS:
      ids_1 = ids[..., None]
      rows = jnp.where(ids_1 == 0, table[0], jnp.zeros((), table.dtype))
      for row in range(1, self.num_embeddings):
        rows = jnp.where(ids_1 == row, table[row], rows)
    else:
      rows = jnp.take(table, ids, axis=0)
    return rows.astype(self.dtype)
