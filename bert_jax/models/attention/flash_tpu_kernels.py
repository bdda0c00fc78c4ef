"""The Mosaic kernel bodies of `flash_tpu`: one tile of the forward, dK/dV and dQ passes.

Each body sees one (batch, head, outer block, inner block) grid step's tiles; `flash_tpu` lays
out the grid, the block specs and the custom VJP around them. The maths and the dropout mask are
`flash`'s Triton kernels': masking by segment ids, float32 online softmax, and
`flash_dropout.keep` on global positions.
"""

import dataclasses

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from bert_jax.models.attention import blocks, flash_dropout, masks

_TRANS_B = (((1,), (1,)), ((), ()))  # a @ b.T
_PLAIN = (((1,), (0,)), ((), ()))  # a @ b


@dataclasses.dataclass(frozen=True)
class Options:
  """Static settings of one attention call (hashable: a `jax.custom_vjp` nondiff argument)."""

  dropout_rate: float
  block: int
  interpret: bool


def _dot(a, b, dimensions=_PLAIN):
  """A float32-accumulated product; float32 operands multiply at full precision."""
  precision = jax.lax.Precision.HIGHEST if a.dtype == jnp.float32 else None
  return jax.lax.dot_general(
    a, b, dimensions, precision=precision, preferred_element_type=jnp.float32
  )


def _column(row_ref):
  """A [1, N] block as an [N, 1] column (a lane-to-sublane relayout inside the kernel)."""
  return row_ref[0][:, None]


def _masked_logits(x, y, segment_x, segment_y, segment_key):
  """Scaled float32 logits ``x @ y.T`` with masked entries at a large negative value, and the mask.

  ``x`` and ``y`` are the query and key tiles in either order; the segment ids are the matching
  column and row, and ``segment_key`` is whichever of them belongs to the keys.
  """
  scale = 1.0 / float(x.shape[-1]) ** 0.5
  logits = _dot(x, y, _TRANS_B) * scale
  mask = (segment_x == segment_y) & (segment_key != 0)
  return jnp.where(mask, logits, masks.large_negative(jnp.float32)), mask


def _keep(streams_ref, query_block, key_block, options: Options, *, keys_major=False):
  """This tile's dropout mask by `flash_dropout.keep` on global positions (None without
  dropout): [Q, K], or [K, Q] when ``keys_major``."""
  if options.dropout_rate == 0:
    return None
  stream = streams_ref[pl.program_id(0) * pl.num_programs(1) + pl.program_id(1)]
  block = options.block
  query_pos = flash_dropout.positions(query_block * block, block, 1 if keys_major else 0)
  key_pos = flash_dropout.positions(key_block * block, block, 0 if keys_major else 1)
  return flash_dropout.keep(stream, query_pos, key_pos, options.dropout_rate)


def forward_kernel(
  streams_ref, q_ref, k_ref, v_ref, segment_q_ref, segment_k_ref,
  out_ref, lse_ref, max_ref, sum_ref, acc_ref,
  *, options: Options,
):  # fmt: skip
  """One (query block, key block) step of the forward: the online softmax into the scratch
  accumulators; the last key block writes the output and the log-sum-exp row."""
  query_block, key_block = pl.program_id(2), pl.program_id(3)

  @pl.when(key_block == 0)
  def _start():
    # Finite, so that max - new_max is never inf - inf.
    max_ref[...] = jnp.full(max_ref.shape, masks.large_negative(jnp.float32), jnp.float32)
    sum_ref[...] = jnp.zeros(sum_ref.shape, jnp.float32)
    acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

  segment_k_1K = segment_k_ref[...]
  logits_QK, mask_QK = _masked_logits(
    q_ref[...], k_ref[...], _column(segment_q_ref), segment_k_1K, segment_k_1K
  )
  max_Q1 = max_ref[...]
  new_max_Q1 = jnp.maximum(max_Q1, jnp.max(logits_QK, axis=1, keepdims=True))
  # Masked entries are zeroed, not just made small: a row with no key left sums to 0.
  probs_QK = jnp.where(mask_QK, jnp.exp(logits_QK - new_max_Q1), 0.0)
  correction_Q1 = jnp.exp(max_Q1 - new_max_Q1)
  sum_ref[...] = sum_ref[...] * correction_Q1 + jnp.sum(probs_QK, axis=1, keepdims=True)
  keep_QK = _keep(streams_ref, query_block, key_block, options)
  if keep_QK is not None:
    probs_QK = jnp.where(keep_QK, probs_QK, 0.0)
  v_KD = v_ref[...]
  acc_ref[...] = acc_ref[...] * correction_Q1 + _dot(probs_QK.astype(v_KD.dtype), v_KD)
  max_ref[...] = new_max_Q1

  @pl.when(key_block == pl.num_programs(3) - 1)
  def _finish():
    # A padding query saw no key (sum 0, accumulator 0): its output is 0 and its lse finite.
    sum_Q1 = sum_ref[...]
    has_keys_Q1 = sum_Q1 > 0
    safe_sum_Q1 = jnp.where(has_keys_Q1, sum_Q1, 1.0)
    inverse_keep = 1.0 / (1.0 - options.dropout_rate)
    out_ref[...] = (acc_ref[...] * (inverse_keep / safe_sum_Q1)).astype(out_ref.dtype)
    lse_Q1 = jnp.where(has_keys_Q1, max_ref[...] + jnp.log(safe_sum_Q1), 0.0)
    # Stored lane-dense, [1, Q] not [Q, 128], by a transpose: TPU v4 has no sublane gather
    # for a direct reshape.
    lse_ref[...] = jnp.broadcast_to(lse_Q1, (lse_Q1.shape[0], blocks.TPU_LANES)).T[:1, :]


def _tile_gradients(probs, d_probs, delta, keep, options: Options, scale: float):
  """(kept probs, d_logits) of one tile, in either orientation (``delta`` broadcasts).

  ``d_logits`` is the gradient of the unscaled q.k products: probs * (d_probs - delta) * scale;
  ``delta`` = sum over keys of probs * d_probs, which holds with dropout too.
  """
  kept = probs
  if keep is not None:
    inverse_keep = 1.0 / (1.0 - options.dropout_rate)
    kept = jnp.where(keep, probs * inverse_keep, 0.0)
    d_probs = jnp.where(keep, d_probs * inverse_keep, 0.0)
  return kept, probs * (d_probs - delta) * scale


def key_gradients_kernel(
  streams_ref, q_ref, k_ref, v_ref, segment_q_ref, segment_k_ref, d_out_ref, lse_ref,
  delta_ref, dk_ref, dv_ref, dk_acc_ref, dv_acc_ref,
  *, options: Options,
):  # fmt: skip
  """One (key block, query block) step of dK and dV, in key-major [K, Q] tiles."""
  key_block, query_block = pl.program_id(2), pl.program_id(3)

  @pl.when(query_block == 0)
  def _start():
    dk_acc_ref[...] = jnp.zeros(dk_acc_ref.shape, jnp.float32)
    dv_acc_ref[...] = jnp.zeros(dv_acc_ref.shape, jnp.float32)

  q_QD, k_KD, v_KD, d_out_QD = q_ref[...], k_ref[...], v_ref[...], d_out_ref[...]
  segment_k_K1 = _column(segment_k_ref)
  # Key-major: the per-query lse and delta are [1, Q] rows, as stored.
  logits_KQ, mask_KQ = _masked_logits(k_KD, q_QD, segment_k_K1, segment_q_ref[...], segment_k_K1)
  # Padding queries (no key, lse 0) get all-zero columns, hence no gradient.
  probs_KQ = jnp.where(mask_KQ, jnp.exp(logits_KQ - lse_ref[...]), 0.0)
  keep_KQ = _keep(streams_ref, query_block, key_block, options, keys_major=True)
  scale = 1.0 / float(q_QD.shape[-1]) ** 0.5
  kept_KQ, d_logits_KQ = _tile_gradients(
    probs_KQ, _dot(v_KD, d_out_QD, _TRANS_B), delta_ref[...], keep_KQ, options, scale
  )
  dv_acc_ref[...] += _dot(kept_KQ.astype(v_KD.dtype), d_out_QD)
  dk_acc_ref[...] += _dot(d_logits_KQ.astype(q_QD.dtype), q_QD)

  @pl.when(query_block == pl.num_programs(3) - 1)
  def _finish():
    dk_ref[...] = dk_acc_ref[...].astype(dk_ref.dtype)
    dv_ref[...] = dv_acc_ref[...].astype(dv_ref.dtype)


def query_gradients_kernel(
  streams_ref, q_ref, k_ref, v_ref, segment_q_ref, segment_k_ref, d_out_ref, lse_ref,
  delta_ref, dq_ref, dq_acc_ref,
  *, options: Options,
):  # fmt: skip
  """One (query block, key block) step of dQ, in [Q, K] tiles."""
  query_block, key_block = pl.program_id(2), pl.program_id(3)

  @pl.when(key_block == 0)
  def _start():
    dq_acc_ref[...] = jnp.zeros(dq_acc_ref.shape, jnp.float32)

  q_QD, k_KD = q_ref[...], k_ref[...]
  segment_k_1K = segment_k_ref[...]
  logits_QK, mask_QK = _masked_logits(
    q_QD, k_KD, _column(segment_q_ref), segment_k_1K, segment_k_1K
  )
  probs_QK = jnp.where(mask_QK, jnp.exp(logits_QK - _column(lse_ref)), 0.0)
  keep_QK = _keep(streams_ref, query_block, key_block, options)
  scale = 1.0 / float(q_QD.shape[-1]) ** 0.5
  d_probs_QK = _dot(d_out_ref[...], v_ref[...], _TRANS_B)
  _, d_logits_QK = _tile_gradients(
    probs_QK, d_probs_QK, _column(delta_ref), keep_QK, options, scale
  )
  dq_acc_ref[...] += _dot(d_logits_QK.astype(q_QD.dtype), k_KD)

  @pl.when(key_block == pl.num_programs(3) - 1)
  def _finish():
    dq_ref[...] = dq_acc_ref[...].astype(dq_ref.dtype)
