"""The Triton kernel bodies of flash attention (`flash` makes the calls).

Nothing of size [B, H, L, L] reaches memory in either pass. The forward kernel runs one program
per (query block, batch, head) and loops over key blocks with the online softmax (float32
running max, sum and accumulator; the products take the compute dtype's operands and
accumulate in float32); it writes the output and each row's float32 log-sum-exp [B, H, L].
The backward recomputes the probabilities from that log-sum-exp: one kernel per key block
accumulates dK and dV over the query blocks, another per query block accumulates dQ over the
key blocks, both using ``delta = rowsum(d_out * out)`` (= sum over keys of probs * d_probs,
which holds with dropout too).

**Dropout** is inverted dropout on the probabilities (kept ones scaled by 1 / (1 - rate)); the
softmax normaliser sums the undropped probabilities, as in `dense.dense_attention`. Whether
element (b, h, q, k) is kept is a counter-based hash of the seed and those four indices
(`flash_dropout`), so the backward kernels regenerate the forward's mask instead of storing
it. The mask is not the one the dense kernel draws for the same rng.

**Masking** is `masks.segment_mask`'s: a query attends to the keys of its own positive segment
id. A padding query (id 0) attends to nothing: its output is zero and it passes no gradient
to queries, keys or values. Real tokens get the dense kernel's outputs and gradients.

The projection's bias is added to the query, key and value as the kernels load them
(`_BiasedRef`): a packed projection is read in place with no pass to add it. For a packed
projection the backward kernels also sum each block's float32 gradient rows, the bias's
gradient in parts, so that no pass reads the packed gradient back to sum it.
"""

import dataclasses

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from bert_jax.models.attention import flash_dropout, flash_launch, masks


def _dot(a, b, *, trans_a=False, trans_b=False):
  """A float32-accumulated product; float32 operands multiply at full precision (no TF32)."""
  precision = jax.lax.Precision.HIGHEST if a.dtype == jnp.float32 else None
  return pltriton.dot(a, b, trans_a=trans_a, trans_b=trans_b, precision=precision)


def _tile_logits(q_QD, k_KD, segment_q_Q, segment_k_K):
  """Scaled float32 logits [Q, K] with masked entries at a large negative value, and the mask.

  The mask is `masks.segment_mask`'s rule for one tile.
  """
  scale = 1.0 / float(q_QD.shape[-1]) ** 0.5
  logits_QK = _dot(q_QD, k_KD, trans_b=True) * scale
  mask_QK = (segment_q_Q[:, None] == segment_k_K[None, :]) & (segment_k_K[None, :] != 0)
  return jnp.where(mask_QK, logits_QK, masks.large_negative(jnp.float32)), mask_QK


@dataclasses.dataclass(frozen=True)
class _BiasedRef:
  """A [rows, D] operand's ref read with its [D] bias added, in the operand's dtype (as
  `layers.add_bias` adds it): the projection's bias costs no pass over the operand."""

  ref: object
  bias_ref: object

  @property
  def shape(self):
    return self.ref.shape

  def __getitem__(self, index):
    return self.ref[index] + self.bias_ref[...][None, :]


def _biased(refs, bias_refs):
  return tuple(_BiasedRef(ref, bias_ref) for ref, bias_ref in zip(refs, bias_refs))


def forward_kernel(
  q_ref, k_ref, v_ref, q_bias_ref, k_bias_ref, v_bias_ref, segment_ref, stream_ref, out_ref,
  lse_ref, *, options: flash_launch.Options,
):  # fmt: skip
  q_ref, k_ref, v_ref = _biased((q_ref, k_ref, v_ref), (q_bias_ref, k_bias_ref, v_bias_ref))
  block_q, block_k = q_ref.shape[0], options.forward_block
  q_start = pl.program_id(0) * block_q
  q_QD = q_ref[...]
  segment_q_Q = segment_ref[pl.ds(q_start, block_q)]
  rows_Q1 = flash_dropout.positions(q_start, block_q, 0)
  stream = stream_ref[...]

  def body(index, carry):
    acc_QD, max_Q, sum_Q = carry
    keys = pl.ds(index * block_k, block_k)
    logits_QK, mask_QK = _tile_logits(q_QD, k_ref[keys, :], segment_q_Q, segment_ref[keys])
    new_max_Q = jnp.maximum(max_Q, jnp.max(logits_QK, axis=1))
    # Masked entries are zeroed, not just made small: a row with no key left sums to 0.
    probs_QK = jnp.where(mask_QK, jnp.exp(logits_QK - new_max_Q[:, None]), 0.0)
    correction_Q = jnp.exp(max_Q - new_max_Q)
    sum_Q = sum_Q * correction_Q + jnp.sum(probs_QK, axis=1)
    if options.dropout_rate > 0:
      keep_QK = flash_dropout.keep(
        stream, rows_Q1, flash_dropout.positions(index * block_k, block_k, 1), options.dropout_rate
      )
      probs_QK = jnp.where(keep_QK, probs_QK, 0.0)
    v_KD = v_ref[keys, :]
    acc_QD = acc_QD * correction_Q[:, None] + _dot(probs_QK.astype(v_KD.dtype), v_KD)
    return acc_QD, new_max_Q, sum_Q

  init = (
    jnp.zeros(q_QD.shape, jnp.float32),
    # Finite, so that max - new_max is never inf - inf.
    jnp.full((block_q,), masks.large_negative(jnp.float32), jnp.float32),
    jnp.zeros((block_q,), jnp.float32),
  )
  acc_QD, max_Q, sum_Q = jax.lax.fori_loop(0, k_ref.shape[0] // block_k, body, init)
  # A padding query saw no key (sum 0, accumulator 0): its output is 0 and its lse finite.
  has_keys_Q = sum_Q > 0
  safe_sum_Q = jnp.where(has_keys_Q, sum_Q, 1.0)
  inverse_keep = 1.0 / (1.0 - options.dropout_rate)
  out_ref[...] = (acc_QD * (inverse_keep / safe_sum_Q)[:, None]).astype(out_ref.dtype)
  lse_ref[...] = jnp.where(has_keys_Q, max_Q + jnp.log(safe_sum_Q), 0.0)


def _tile_gradients(
  q_QD, k_KD, v_KD, d_out_QD, lse_Q, delta_Q, segments, positions, stream, options
):
  """Recomputes one tile's probabilities; returns (kept probs, d_logits) in the compute dtype.

  ``d_logits`` is the gradient of the unscaled q.k products: probs * (d_probs - delta) * scale.
  """
  segment_q_Q, segment_k_K = segments
  logits_QK, mask_QK = _tile_logits(q_QD, k_KD, segment_q_Q, segment_k_K)
  # Padding queries (no key, lse 0) get all-zero rows, hence no gradient.
  probs_QK = jnp.where(mask_QK, jnp.exp(logits_QK - lse_Q[:, None]), 0.0)
  d_probs_QK = _dot(d_out_QD, v_KD, trans_b=True)
  kept_QK = probs_QK
  if options.dropout_rate > 0:
    inverse_keep = 1.0 / (1.0 - options.dropout_rate)
    keep_QK = flash_dropout.keep(stream, *positions, options.dropout_rate)
    kept_QK = jnp.where(keep_QK, probs_QK * inverse_keep, 0.0)
    d_probs_QK = jnp.where(keep_QK, d_probs_QK * inverse_keep, 0.0)
  scale = 1.0 / float(q_QD.shape[-1]) ** 0.5
  d_logits_QK = probs_QK * (d_probs_QK - delta_Q[:, None]) * scale
  return kept_QK.astype(v_KD.dtype), d_logits_QK.astype(q_QD.dtype)


def key_gradients_kernel(
  q_ref, k_ref, v_ref, q_bias_ref, k_bias_ref, v_bias_ref, segment_ref, stream_ref, d_out_ref,
  lse_ref, delta_ref, *out_refs, options: flash_launch.Options, packed: bool,
):  # fmt: skip
  """``out_refs``: the dK and dV blocks; or, ``packed``, one [block, 2, D] block of a packed
  gradient's key and value slots and the [2, D] float32 sums of its rows (this program's part
  of the key's and value's bias gradients)."""
  q_ref, k_ref, v_ref = _biased((q_ref, k_ref, v_ref), (q_bias_ref, k_bias_ref, v_bias_ref))
  block = options.backward_block
  k_start = pl.program_id(0) * block
  k_KD, v_KD = k_ref[...], v_ref[...]
  segment_k_K = segment_ref[pl.ds(k_start, block)]
  columns_1K = flash_dropout.positions(k_start, block, 1)
  stream = stream_ref[...]

  def body(index, carry):
    dk_KD, dv_KD = carry
    queries = pl.ds(index * block, block)
    q_QD, d_out_QD = q_ref[queries, :], d_out_ref[queries, :]
    kept_QK, d_logits_QK = _tile_gradients(
      q_QD,
      k_KD,
      v_KD,
      d_out_QD,
      lse_ref[queries],
      delta_ref[queries],
      (segment_ref[queries], segment_k_K),
      (flash_dropout.positions(index * block, block, 0), columns_1K),
      stream,
      options,
    )
    dv_KD = dv_KD + _dot(kept_QK, d_out_QD, trans_a=True)
    dk_KD = dk_KD + _dot(d_logits_QK, q_QD, trans_a=True)
    return dk_KD, dv_KD

  zeros_KD = jnp.zeros(k_KD.shape, jnp.float32)
  dk_KD, dv_KD = jax.lax.fori_loop(0, q_ref.shape[0] // block, body, (zeros_KD, zeros_KD))
  if packed:
    packed_ref, bias_partials_ref = out_refs
    packed_ref[:, 0, :] = dk_KD.astype(packed_ref.dtype)
    packed_ref[:, 1, :] = dv_KD.astype(packed_ref.dtype)
    bias_partials_ref[0, :] = jnp.sum(dk_KD, axis=0)
    bias_partials_ref[1, :] = jnp.sum(dv_KD, axis=0)
  else:
    dk_ref, dv_ref = out_refs
    dk_ref[...] = dk_KD.astype(dk_ref.dtype)
    dv_ref[...] = dv_KD.astype(dv_ref.dtype)


def query_gradients_kernel(
  q_ref, k_ref, v_ref, q_bias_ref, k_bias_ref, v_bias_ref, segment_ref, stream_ref, d_out_ref,
  lse_ref, delta_ref, *out_refs, options: flash_launch.Options, packed: bool,
):  # fmt: skip
  """``out_refs``: the dQ block; or, ``packed``, the packed gradient and bias partial sums the
  dK/dV kernel wrote (aliased to the outputs, not read), the query slot's block of the first
  and the [D] float32 sum of that block's rows in the second."""
  dq_ref = out_refs[2] if packed else out_refs[0]
  q_ref, k_ref, v_ref = _biased((q_ref, k_ref, v_ref), (q_bias_ref, k_bias_ref, v_bias_ref))
  block = options.backward_block
  q_start = pl.program_id(0) * block
  q_QD, d_out_QD = q_ref[...], d_out_ref[...]
  lse_Q, delta_Q = lse_ref[...], delta_ref[...]
  segment_q_Q = segment_ref[pl.ds(q_start, block)]
  rows_Q1 = flash_dropout.positions(q_start, block, 0)
  stream = stream_ref[...]

  def body(index, dq_QD):
    keys = pl.ds(index * block, block)
    k_KD = k_ref[keys, :]
    _, d_logits_QK = _tile_gradients(
      q_QD,
      k_KD,
      v_ref[keys, :],
      d_out_QD,
      lse_Q,
      delta_Q,
      (segment_q_Q, segment_ref[keys]),
      (rows_Q1, flash_dropout.positions(index * block, block, 1)),
      stream,
      options,
    )
    return dq_QD + _dot(d_logits_QK, k_KD)

  dq_QD = jax.lax.fori_loop(0, k_ref.shape[0] // block, body, jnp.zeros(q_QD.shape, jnp.float32))
  dq_ref[...] = dq_QD.astype(dq_ref.dtype)
  if packed:
    out_refs[3][...] = jnp.sum(dq_QD, axis=0)
