"""The Pallas calls of the Triton flash kernels: which blocks of which arrays each program sees.

`flash` wraps these in custom VJPs and entry points; the kernel bodies are in
`flash_kernels`. A packed [B, L, 3, H, D] projection is read in place at its slots
(`PACKED_SLOTS`), and its gradient written in place by the two backward kernels.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from bert_jax.models.attention import flash_kernels, flash_launch


def _specs(length: int, head_dim: int, block: int):
  """BlockSpecs over a (block, batch, head) grid: a block of [B, H, L], all of [B, H, L], the
  [B, L] segment ids and the [B, H] streams."""
  return (
    pl.BlockSpec((None, None, block), lambda i, b, h: (b, h, i)),
    pl.BlockSpec((None, None, length), lambda i, b, h: (b, h, 0)),
    pl.BlockSpec((None, length), lambda i, b, h: (b, 0)),
    pl.BlockSpec((None, None), lambda i, b, h: (b, h)),
  )


def _operand_specs(length: int, head_dim: int, block: int, slot):
  """(a block of the rows, all rows) BlockSpecs of a [B, L, H, D] operand over the (block,
  batch, head) grid; with ``slot`` an int, of that slot of a packed [B, L, 3, H, D] array,
  which the kernels then read in place (no copy of the query, key or value out of it)."""
  if slot is None:
    return (
      pl.BlockSpec((None, block, None, head_dim), lambda i, b, h: (b, i, h, 0)),
      pl.BlockSpec((None, length, None, head_dim), lambda i, b, h: (b, 0, h, 0)),
    )
  return (
    pl.BlockSpec((None, block, None, None, head_dim), lambda i, b, h: (b, i, slot, h, 0)),
    pl.BlockSpec((None, length, None, None, head_dim), lambda i, b, h: (b, 0, slot, h, 0)),
  )


# The packed array's slots of the query, key and value: keys and values first, so that the
# dK/dV kernel writes both into one block of two slots of the packed gradient (Triton's blocks
# are powers of two), and the dQ kernel then writes the third slot of the same buffer.
PACKED_SLOTS = (2, 0, 1)


@dataclasses.dataclass(frozen=True)
class Operands:
  """The query, key and value: three [B, L, H, D] arrays, or one packed [B, L, 3, H, D] array
  of keys, values and queries passed three times (``packed``), each read at its own slot; and
  their biases [3, H, D] in the same slot order, added as the kernels read them (zeros where
  the operands have theirs already)."""

  arrays: tuple
  packed: bool
  bias_NHD: object

  @property
  def shape_BLHD(self):
    shape = self.arrays[0].shape
    return shape[:2] + shape[3:] if self.packed else shape

  @property
  def inputs(self):
    """The kernels' first six inputs: query, key, value and their biases."""
    return (*self.arrays, *(self.bias_NHD,) * 3)

  def specs(self, block: int):
    """[(tile, whole)] BlockSpecs of the query, key and value, and their biases'."""
    _, length, _, head_dim = self.shape_BLHD
    operands = [
      _operand_specs(length, head_dim, block, slot if self.packed else None)
      for slot in PACKED_SLOTS
    ]
    biases = [
      pl.BlockSpec((None, None, head_dim), functools.partial(_bias_index, slot))
      for slot in PACKED_SLOTS
    ]
    return operands, biases


def _bias_index(slot, i, b, h):
  del i, b
  return slot, h, 0


def forward(options: flash_launch.Options, operands: Operands, segment_ids_BL, stream_BH):
  batch, length, heads, head_dim = operands.shape_BLHD
  block = options.forward_block
  row_tile, _, segments, stream = _specs(length, head_dim, block)
  ((q_tile, _), (_, k_whole), (_, v_whole)), biases = operands.specs(block)
  dtype = operands.arrays[0].dtype
  out_tile = _operand_specs(length, head_dim, block, None)[0]
  out_BLHD, lse_BHL = pl.pallas_call(
    functools.partial(flash_kernels.forward_kernel, options=options),
    grid=(length // block, batch, heads),
    in_specs=[q_tile, k_whole, v_whole, *biases, segments, stream],
    out_specs=[out_tile, row_tile],
    out_shape=[
      jax.ShapeDtypeStruct((batch, length, heads, head_dim), dtype),
      jax.ShapeDtypeStruct((batch, heads, length), jnp.float32),
    ],
    compiler_params=options.compiler_params(backward=False),
    interpret=options.interpret,
    name="flash_attention_forward",
  )(*operands.inputs, segment_ids_BL, stream_BH)
  return out_BLHD, lse_BHL


def backward(options: flash_launch.Options, operands: Operands, residuals, d_out_BLHD):
  """(dq, dk, dv), each [B, L, H, D] in the operands' dtype; for packed operands, their
  gradient packed the same way and its float32 row sums per block [blocks, B, 3, H, D]."""
  segment_ids_BL, stream_BH, out_BLHD, lse_BHL = residuals
  batch, length, heads, head_dim = operands.shape_BLHD
  block = options.backward_block
  row_tile, row, segments, stream = _specs(length, head_dim, block)
  ((q_tile, q_whole), (k_tile, k_whole), (v_tile, v_whole)), biases = operands.specs(block)
  tile, whole = _operand_specs(length, head_dim, block, None)
  dtype = operands.arrays[0].dtype
  d_out_BLHD = d_out_BLHD.astype(dtype)  # The products take one operand dtype.
  delta_BHL = jnp.einsum(
    "blhd,blhd->bhl", d_out_BLHD.astype(jnp.float32), out_BLHD.astype(jnp.float32)
  )
  inputs = (*operands.inputs, segment_ids_BL, stream_BH, d_out_BLHD, lse_BHL, delta_BHL)
  call = functools.partial(
    pl.pallas_call,
    grid=(length // block, batch, heads),
    compiler_params=options.compiler_params(backward=True),
    interpret=options.interpret,
  )
  gradient = jax.ShapeDtypeStruct((batch, length, heads, head_dim), dtype)
  query_specs = [q_tile, k_whole, v_whole, *biases, segments, stream, tile, row_tile, row_tile]
  key_value_out = {"out_specs": [tile, tile], "out_shape": [gradient, gradient]}
  query_out = {"in_specs": query_specs, "out_specs": tile, "out_shape": gradient}
  if operands.packed:
    # The dK/dV kernel writes slots 0 and 1 (the key's and value's, `PACKED_SLOTS`) of the
    # packed gradient, and the dQ kernel slot 2 of that same buffer, aliased: nothing is
    # copied or packed after the kernels. Each program also writes its block's row sums into
    # the same slots of a [blocks, B, 3, H, D] float32 array, the bias's gradient in parts.
    packed_gradient = jax.ShapeDtypeStruct(operands.arrays[0].shape, dtype)
    bias_partials = jax.ShapeDtypeStruct((length // block, batch, 3, heads, head_dim), jnp.float32)
    key_value_out = {
      "out_specs": [
        pl.BlockSpec((None, block, 2, None, head_dim), lambda i, b, h: (b, i, 0, h, 0)),
        pl.BlockSpec((None, None, 2, None, head_dim), lambda i, b, h: (i, b, 0, h, 0)),
      ],
      "out_shape": [packed_gradient, bias_partials],
    }
    query_slot = PACKED_SLOTS[0]
    query_out = {
      "in_specs": [
        *query_specs,
        pl.BlockSpec(memory_space=pl.ANY),
        pl.BlockSpec(memory_space=pl.ANY),
      ],
      "out_specs": [
        _operand_specs(length, head_dim, block, query_slot)[0],
        pl.BlockSpec((None, None, None, None, head_dim), lambda i, b, h: (i, b, query_slot, h, 0)),
      ],
      "out_shape": [packed_gradient, bias_partials],
      "input_output_aliases": {len(inputs): 0, len(inputs) + 1: 1},
    }
  key_value = call(
    functools.partial(flash_kernels.key_gradients_kernel, options=options, packed=operands.packed),
    in_specs=[q_whole, k_tile, v_tile, *biases, segments, stream, whole, row, row],
    name="flash_attention_key_gradients",
    **key_value_out,
  )(*inputs)
  query_inputs = (*inputs, *key_value) if operands.packed else inputs
  query = call(
    functools.partial(
      flash_kernels.query_gradients_kernel, options=options, packed=operands.packed
    ),
    name="flash_attention_query_gradients",
    **query_out,
  )(*query_inputs)
  return tuple(query) if operands.packed else (query, *key_value)
