"""Chunked local (sliding-window) attention with memory linear in sequence length.

The sequence is cut into chunks of ``chunk_len``; each chunk attends to itself, the
``n_chunks_before`` chunks before it and the ``n_chunks_after`` chunks after it. Unlike LSH
attention nothing wraps around: windows running past either end of the sequence are filled with
padding keys (segment id 0), which the ordinary padding mask removes. The largest tensor is the
chunked logits [B, H, L / chunk_len, chunk_len, window * chunk_len].
"""

import math

import jax
import jax.numpy as jnp

from bert_jax.errors import UserInputError
from bert_jax.models.attention import chunk_window, masks


def _windows(x_BCQ, n_chunks_before, n_chunks_after):
  """[B, C, Q, ...] -> [B, C, W*Q, ...]: chunk c next to chunks c-before .. c+after, zero-padded."""
  n_chunks = x_BCQ.shape[1]
  pad = [(0, 0)] * x_BCQ.ndim
  pad[1] = (n_chunks_before, n_chunks_after)
  padded_BCQ = jnp.pad(x_BCQ, pad)
  window = n_chunks_before + 1 + n_chunks_after
  return jnp.concatenate([padded_BCQ[:, i : i + n_chunks] for i in range(window)], axis=2)


def local_attention(
  query_BLHD,
  key_BLHD,
  value_BLHD,
  segment_ids_BL,
  *,
  chunk_len,
  n_chunks_before=1,
  n_chunks_after=0,
  causal=False,
):
  """Attention of each chunk to itself and its neighbouring chunks.

  Args:
    query_BLHD: queries [B, L, H, D]; logits are scaled by 1/sqrt(D).
    key_BLHD: keys [B, L, H, D].
    value_BLHD: values [B, L, H, D].
    segment_ids_BL: int [B, L]; 0 = padding, equal positive ids may attend to each other.
    chunk_len: chunk length; L must be a multiple of it.
    n_chunks_before: earlier chunks each chunk attends to.
    n_chunks_after: later chunks each chunk attends to.
    causal: forbid keys at later positions than the query.

  Returns:
    [B, L, H, D] in the dtype of ``query_BLHD``; softmax is computed in float32. Rows of padding
    queries (which see no key) are finite but meaningless.
  """
  batch, length, n_heads, head_dim = query_BLHD.shape
  if key_BLHD.shape != query_BLHD.shape or value_BLHD.shape != query_BLHD.shape:
    raise UserInputError(
      f"query, key and value must share one [batch, length, heads, head_dim] "
      f"shape, got {query_BLHD.shape}, {key_BLHD.shape} and {value_BLHD.shape}."
    )
  if segment_ids_BL.shape != (batch, length):
    raise UserInputError(
      f"segment_ids has shape {segment_ids_BL.shape}, expected {(batch, length)}; "
      "pass one id per token (0 = padding)."
    )
  chunk_window.check_window(chunk_len, n_chunks_before, n_chunks_after)
  chunk_window.check_whole_chunks(length, chunk_len)
  n_chunks = length // chunk_len

  def chunk(x_BL):
    return x_BL.reshape((batch, n_chunks, chunk_len) + x_BL.shape[2:])

  def windows(x_BCQ):
    return _windows(x_BCQ, n_chunks_before, n_chunks_after)

  query_BCQHD = chunk(query_BLHD)
  key_BCKHD = windows(chunk(key_BLHD))
  value_BCKHD = windows(chunk(value_BLHD))
  logits_BHCQK = jnp.einsum(
    "bcqhd,bckhd->bhcqk", query_BCQHD, key_BCKHD, preferred_element_type=jnp.float32
  ) * (1.0 / math.sqrt(head_dim))

  # Out-of-range window slots are padded with segment id 0, so the padding mask removes them.
  seg_q_BCQ = chunk(segment_ids_BL)
  seg_k_BCK = windows(seg_q_BCQ)
  allowed_BCQK = (seg_q_BCQ[..., :, None] == seg_k_BCK[..., None, :]) & (seg_k_BCK != 0)[
    ..., None, :
  ]
  if causal:
    pos_q_BCQ = chunk(jnp.broadcast_to(jnp.arange(length), (batch, length)))
    allowed_BCQK &= windows(pos_q_BCQ)[..., None, :] <= pos_q_BCQ[..., :, None]
  logits_BHCQK = jnp.where(allowed_BCQK[:, None], logits_BHCQK, masks.large_negative(jnp.float32))

  probs_BHCQK = jax.nn.softmax(logits_BHCQK, axis=-1)
  out_BCQHD = jnp.einsum(
    "bhcqk,bckhd->bcqhd",
    probs_BHCQK.astype(value_BLHD.dtype),
    value_BCKHD,
    preferred_element_type=jnp.float32,
  )
  return out_BCQHD.reshape(batch, length, n_heads, head_dim).astype(query_BLHD.dtype)
