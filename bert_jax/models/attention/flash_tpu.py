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

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from bert_jax.models.attention import blocks, flash_tpu_kernels

_BLOCK_CHOICES = (512, 256, 128)
# The inner grid axis carries the scratch accumulators from one step to the next.
_SEMANTICS = ("parallel", "parallel", "parallel", "arbitrary")


def block_size(length: int, block=None) -> int:
  """``block`` if given and valid, else the largest of 512, 256, 128 that divides ``length``.

  Raises:
    UserInputError: when ``length`` is not a multiple of 128.
    ValueError: for a ``block`` that is not one of those or does not divide ``length``.
  """
  largest = blocks.largest_dividing(length, _BLOCK_CHOICES, "'flash' on TPU")
  if block is None:
    return largest
  if block not in _BLOCK_CHOICES or length % block:
    raise ValueError(f"block={block} must be one of {_BLOCK_CHOICES} and divide {length}")
  return block


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


def _call(
  kernel,
  options: flash_tpu_kernels.Options,
  grid,
  in_specs,
  out_specs,
  out_shape,
  scratch,
  name,
  cost,
):
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


def _forward(
  options: flash_tpu_kernels.Options, q_BHLD, k_BHLD, v_BHLD, segment_ids_B1L, streams_N
):
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
    flash_tpu_kernels.forward_kernel,
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
    flash_tpu_kernels.key_gradients_kernel,
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
    flash_tpu_kernels.query_gradients_kernel,
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
  options = flash_tpu_kernels.Options(
    dropout_rate, block_size(query_BLHD.shape[1], block), interpret
  )
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
