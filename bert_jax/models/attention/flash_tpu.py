"""FlashAttention-2 for TPUs in Pallas (Mosaic), with the GPU kernel's maths and dropout mask.

The TPU counterpart of `flash`'s Triton kernels: same masking (`masks.segment_mask`'s rule;
padding queries get a zero output and pass no gradient), same float32 online softmax, same
inverted dropout on the probabilities with the normaliser over the undropped ones, and the same
`flash_dropout.keep` hash of (stream, global query position, global key position), so one
rng gives one mask on both platforms. Nothing of size [B, H, L, L] reaches HBM.

Layout is [B, H, L, D] (transposed in and out here) and every kernel runs on a grid of
(batch, head, outer block, inner block); the inner axis is the sequential ("arbitrary") one
and accumulates into float32 VMEM scratch, the other three are parallel (megacore splits them).

- Forward, grid (b, h, query block, key block): running max, sum and output accumulator in
  scratch; the last key block writes the output and the float32 log-sum-exp [B, H, 1, L].
- dK/dV, grid (b, h, key block, query block): recomputes each tile's probabilities from the
  log-sum-exp in key-major [K, Q] orientation, so the per-query statistics (log-sum-exp and
  ``delta = rowsum(d_out * out)``) are lane rows as stored and every product is a plain or
  right-transposed one.
- dQ, grid (b, h, query block, key block): the same tile in [Q, K] orientation.

The per-(batch, head) stream words of the hash are scalar-prefetched into SMEM. Blocks are
square, 512, 256 or 128 positions (the largest dividing the length: fewer, larger grid steps);
the length must be a multiple of the 128-lane vector width.
"""

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from bert_jax.errors import UserInputError
from bert_jax.models.attention import flash_dropout, masks

_LANES = 128
_BLOCK_CHOICES = (512, 256, 128)
_TRANS_B = (((1,), (1,)), ((), ()))  # a @ b.T
_PLAIN = (((1,), (0,)), ((), ()))  # a @ b
# The inner grid axis carries the scratch accumulators from one step to the next.
_SEMANTICS = ("parallel", "parallel", "parallel", "arbitrary")


def block_size(length: int, block=None) -> int:
  """``block`` if given and valid, else the largest of 512, 256, 128 that divides ``length``.

  Raises:
    UserInputError: when ``length`` is not a multiple of 128.
    ValueError: for a ``block`` that is not one of those or does not divide ``length``.
  """
  if length % _LANES:
    raise UserInputError(
      f"attention_kind='flash' on TPU needs a sequence length that is a multiple of {_LANES}, "
      f"got {length}; use e.g. data.max_seq_length={-(-length // _LANES) * _LANES} or "
      "model.attention_kind='dense'"
    )
  if block is None:
    return next(b for b in _BLOCK_CHOICES if length % b == 0)
  if block not in _BLOCK_CHOICES or length % block:
    raise ValueError(f"block={block} must be one of {_BLOCK_CHOICES} and divide {length}")
  return block


@dataclasses.dataclass(frozen=True)
class _Options:
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


def _keep(streams_ref, query_block, key_block, options: _Options, *, keys_major=False):
  """This tile's dropout mask by `flash_dropout.keep` on global positions (None without
  dropout): [Q, K], or [K, Q] when ``keys_major``."""
  if options.dropout_rate == 0:
    return None
  stream = streams_ref[pl.program_id(0) * pl.num_programs(1) + pl.program_id(1)]
  block = options.block
  query_pos = flash_dropout.positions(query_block * block, block, 1 if keys_major else 0)
  key_pos = flash_dropout.positions(key_block * block, block, 0 if keys_major else 1)
  return flash_dropout.keep(stream, query_pos, key_pos, options.dropout_rate)


def _forward_kernel(
  streams_ref, q_ref, k_ref, v_ref, segment_q_ref, segment_k_ref,
  out_ref, lse_ref, max_ref, sum_ref, acc_ref,
  *, options: _Options,
):  # fmt: skip
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
    lse_ref[...] = jnp.broadcast_to(lse_Q1, (lse_Q1.shape[0], _LANES)).T[:1, :]


def _tile_gradients(probs, d_probs, delta, keep, options: _Options, scale: float):
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


def _key_gradients_kernel(
  streams_ref, q_ref, k_ref, v_ref, segment_q_ref, segment_k_ref, d_out_ref, lse_ref,
  delta_ref, dk_ref, dv_ref, dk_acc_ref, dv_acc_ref,
  *, options: _Options,
):  # fmt: skip
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


def _query_gradients_kernel(
  streams_ref, q_ref, k_ref, v_ref, segment_q_ref, segment_k_ref, d_out_ref, lse_ref,
  delta_ref, dq_ref, dq_acc_ref,
  *, options: _Options,
):  # fmt: skip
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


def _specs(block: int, head_dim: int, *, keys_outer: bool):
  """BlockSpecs over a (batch, head, outer, inner) grid, the outer axis walking query blocks
  (or key blocks when ``keys_outer``): a query tile and a key tile of [B, H, L, D], the query
  and the key segment ids of [B, 1, L], and a query block of per-query statistics [B, H, 1, L].
  """

  def spec(shape, index_map):
    def grid_to_block(b, h, outer, inner, *_):  # *_: the scalar-prefetched streams.
      query, key = (inner, outer) if keys_outer else (outer, inner)
      return index_map(b, h, query, key)

    return pl.BlockSpec(shape, grid_to_block)

  return (
    spec((None, None, block, head_dim), lambda b, h, q, k: (b, h, q, 0)),
    spec((None, None, block, head_dim), lambda b, h, q, k: (b, h, k, 0)),
    spec((None, 1, block), lambda b, h, q, k: (b, 0, q)),
    spec((None, 1, block), lambda b, h, q, k: (b, 0, k)),
    spec((None, None, 1, block), lambda b, h, q, k: (b, h, 0, q)),
  )


def _nbytes(arrays) -> int:
  return sum(math.prod(x.shape) * jnp.dtype(x.dtype).itemsize for x in arrays)


def _cost(q_BHLD, block: int, *, products: int, once, per_outer_block) -> pl.CostEstimate:
  """What XLA's cost analysis is told of one kernel (it sees nothing inside a Pallas call).

  Args:
    q_BHLD: the queries (for the shapes).
    block: the block edge.
    products: [L, L, D] products per (sequence, head); each tile also takes one exp per entry.
    once: the arrays (or their shapes) the kernel reads or writes once.
    per_outer_block: those it reads again for every block of the outer grid axis. The segment
      ids (a few kB) are left out.
  """
  batch, heads, length, head_dim = q_BHLD.shape
  pairs = batch * heads * length * length
  return pl.CostEstimate(
    flops=2 * products * pairs * head_dim,
    transcendentals=pairs,
    bytes_accessed=_nbytes(once) + (length // block) * _nbytes(per_outer_block),
  )


def _call(kernel, options: _Options, grid, in_specs, out_specs, out_shape, scratch, name, cost):
  return pl.pallas_call(
    functools.partial(kernel, options=options),
    grid_spec=pltpu.PrefetchScalarGridSpec(
      num_scalar_prefetch=1,
      grid=grid,
      in_specs=in_specs,
      out_specs=out_specs,
      scratch_shapes=scratch,
    ),
    out_shape=out_shape,
    compiler_params=pltpu.CompilerParams(dimension_semantics=_SEMANTICS),
    interpret=options.interpret,
    name=name,
    cost_estimate=cost,
  )


def _forward(options: _Options, q_BHLD, k_BHLD, v_BHLD, segment_ids_B1L, streams_N):
  batch, heads, length, head_dim = q_BHLD.shape
  block = options.block
  query_tile, key_tile, query_segments, key_segments, query_stats = _specs(
    block, head_dim, keys_outer=False
  )
  out_shapes = [
    jax.ShapeDtypeStruct(q_BHLD.shape, q_BHLD.dtype),
    jax.ShapeDtypeStruct((batch, heads, 1, length), jnp.float32),
  ]
  return _call(
    _forward_kernel,
    options,
    (batch, heads, length // block, length // block),
    [query_tile, key_tile, key_tile, query_segments, key_segments],
    [query_tile, query_stats],
    out_shapes,
    [
      pltpu.VMEM((block, 1), jnp.float32),
      pltpu.VMEM((block, 1), jnp.float32),
      pltpu.VMEM((block, head_dim), jnp.float32),
    ],
    "flash_attention_tpu_forward",
    # q . k and probs . v; the keys and values of a sequence are read once per query block.
    _cost(q_BHLD, block, products=2, once=[q_BHLD, *out_shapes], per_outer_block=[k_BHLD, v_BHLD]),
  )(streams_N, q_BHLD, k_BHLD, v_BHLD, segment_ids_B1L, segment_ids_B1L)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _flash(options, q_BHLD, k_BHLD, v_BHLD, segment_ids_B1L, streams_N):
  return _forward(options, q_BHLD, k_BHLD, v_BHLD, segment_ids_B1L, streams_N)[0]


def _flash_forward(options, q_BHLD, k_BHLD, v_BHLD, segment_ids_B1L, streams_N):
  out_BHLD, lse_BH1L = _forward(options, q_BHLD, k_BHLD, v_BHLD, segment_ids_B1L, streams_N)
  return out_BHLD, (q_BHLD, k_BHLD, v_BHLD, segment_ids_B1L, streams_N, out_BHLD, lse_BH1L)


def _flash_backward(options, residuals, d_out_BHLD):
  q_BHLD, k_BHLD, v_BHLD, segment_ids_B1L, streams_N, out_BHLD, lse_BH1L = residuals
  batch, heads, length, head_dim = q_BHLD.shape
  blocks = length // options.block
  d_out_BHLD = d_out_BHLD.astype(v_BHLD.dtype)  # The products take one operand dtype.
  delta_BH1L = jnp.einsum(
    "bhld,bhld->bhl", d_out_BHLD.astype(jnp.float32), out_BHLD.astype(jnp.float32)
  )[:, :, None, :]
  inputs = (streams_N, q_BHLD, k_BHLD, v_BHLD, segment_ids_B1L, segment_ids_B1L, d_out_BHLD)
  inputs += (lse_BH1L, delta_BH1L)
  accumulator = pltpu.VMEM((options.block, head_dim), jnp.float32)

  query_tile, key_tile, query_segments, key_segments, query_stats = _specs(
    options.block, head_dim, keys_outer=True
  )
  dk_BHLD, dv_BHLD = _call(
    _key_gradients_kernel,
    options,
    (batch, heads, blocks, blocks),
    [query_tile, key_tile, key_tile, query_segments, key_segments, query_tile]
    + [query_stats, query_stats],
    [key_tile, key_tile],
    [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in (k_BHLD, v_BHLD)],
    [accumulator, accumulator],
    "flash_attention_tpu_key_gradients",
    # q . k again, d_out . v, and the two gradients; the query side is read once per key block.
    _cost(
      q_BHLD,
      options.block,
      products=4,
      once=[k_BHLD, v_BHLD, k_BHLD, v_BHLD],
      per_outer_block=[q_BHLD, d_out_BHLD, lse_BH1L, delta_BH1L],
    ),
  )(*inputs)

  query_tile, key_tile, query_segments, key_segments, query_stats = _specs(
    options.block, head_dim, keys_outer=False
  )
  dq_BHLD = _call(
    _query_gradients_kernel,
    options,
    (batch, heads, blocks, blocks),
    [query_tile, key_tile, key_tile, query_segments, key_segments, query_tile]
    + [query_stats, query_stats],
    query_tile,
    jax.ShapeDtypeStruct(q_BHLD.shape, q_BHLD.dtype),
    [accumulator],
    "flash_attention_tpu_query_gradients",
    # q . k and d_out . v again, and dq; keys and values are read once per query block.
    _cost(
      q_BHLD,
      options.block,
      products=3,
      once=[q_BHLD, d_out_BHLD, lse_BH1L, delta_BH1L, q_BHLD],
      per_outer_block=[k_BHLD, v_BHLD],
    ),
  )(*inputs)
  return dq_BHLD, dk_BHLD, dv_BHLD, None, None


_flash.defvjp(_flash_forward, _flash_backward)


def attention(
  query_BLHD,
  key_BLHD,
  value_BLHD,
  segment_ids_BL,
  stream_BH,
  *,
  dropout_rate: float,
  block=None,
  interpret: bool = False,
):
  """Flash attention on one device's arrays by the Mosaic kernels (`flash.flash_attention`
  calls it per shard on TPU).

  Args:
    query_BLHD: queries [batch, length, heads, head_dim]; length a multiple of 128.
    key_BLHD: keys, same shape and dtype.
    value_BLHD: values, same shape and dtype.
    segment_ids_BL: int [batch, length]; 0 is padding, equal positive ids may attend.
    stream_BH: uint32 [batch, heads], `flash_dropout.streams_BH` (any values without dropout).
    dropout_rate: dropout on the attention probabilities, in [0, 1); 0 turns it off.
    block: query/key block edge (512, 256 or 128, dividing the length); default: the largest.
    interpret: run in Pallas interpret mode (off TPU: tests and CPU debugging).

  Returns:
    Attention output [batch, length, heads, head_dim] in the dtype of ``query_BLHD``; zero at
    padding queries.

  Raises:
    UserInputError: for a length that is not a multiple of 128.
  """
  options = _Options(dropout_rate, block_size(query_BLHD.shape[1], block), interpret)
  q_BHLD, k_BHLD, v_BHLD = (x.transpose(0, 2, 1, 3) for x in (query_BLHD, key_BLHD, value_BLHD))
  out_BHLD = _flash(
    options,
    q_BHLD,
    k_BHLD,
    v_BHLD,
    segment_ids_BL.astype(jnp.int32)[:, None, :],
    stream_BH.astype(jnp.uint32).reshape(-1),
  )
  return out_BHLD.transpose(0, 2, 1, 3)
