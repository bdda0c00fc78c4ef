"""Attention masks shared by every attention kernel.

All kernels take ``segment_ids_BL``: an int array where 0 marks padding and any positive value
names the document a token belongs to. A query may attend to a key only when both carry the same
positive id, so an ordinary 0/1 ``input_mask`` gives plain padding masking and packed sequences
(several documents in one row, ids 1, 2, 3, ...) never attend across documents.
"""

import jax.numpy as jnp


def segment_mask(segment_ids_q_BQ, segment_ids_k_BK):
  """Boolean mask [B, 1, Q, K]: True where query q may attend to key k."""
  same_segment_BQK = segment_ids_q_BQ[:, :, None] == segment_ids_k_BK[:, None, :]
  key_is_real_B1K = (segment_ids_k_BK != 0)[:, None, :]
  return (same_segment_BQK & key_is_real_B1K)[:, None, :, :]


def large_negative(dtype):
  """A finite mask value that stays finite after softmax arithmetic in ``dtype`` (bf16-safe)."""
  return jnp.asarray(-0.7 * float(jnp.finfo(dtype).max), dtype)
