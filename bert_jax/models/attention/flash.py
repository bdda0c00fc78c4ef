"""FlashAttention-2 in Pallas with attention dropout: Triton kernels here, Mosaic on TPU.

`flash_attention` is the entry point (`flash_attention_packed` the same for a packed
query/key/value array): on TPU it runs `flash_tpu`'s Mosaic kernels, which do the same maths
with the same dropout mask; everywhere else the Triton kernels below.

The kernel bodies are in `flash_kernels`, their launch settings in `flash_launch`; this module
makes the Pallas calls (which blocks of which arrays each kernel program sees), their custom
VJPs and the entry points.

Requirements: head_dim a power of two in [16, 256] and a length that is a multiple of 16 (the
smallest block Triton's products take; 128 on TPU). Off GPU and TPU the Triton kernels run in
Pallas interpret mode (slow; for tests and CPU debugging). Under a mesh either platform's
kernels run per shard (`per_shard`).
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from bert_jax.errors import UserInputError
from bert_jax.models import config as config_lib
from bert_jax.models import layers, per_shard
from bert_jax.models import platform as platform_lib
from bert_jax.models.attention import flash_dropout, flash_kernels, flash_launch, flash_tpu


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
class _Operands:
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


def _forward(options: flash_launch.Options, operands: _Operands, segment_ids_BL, stream_BH):
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


def _backward(options: flash_launch.Options, operands: _Operands, residuals, d_out_BLHD):
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


def _no_bias(operand_BLHD):
  return jnp.zeros((3,) + operand_BLHD.shape[2:], operand_BLHD.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _flash(options, q_BLHD, k_BLHD, v_BLHD, segment_ids_BL, stream_BH):
  operands = _Operands((q_BLHD, k_BLHD, v_BLHD), False, _no_bias(q_BLHD))
  return _forward(options, operands, segment_ids_BL, stream_BH)[0]


def _flash_forward(options, q_BLHD, k_BLHD, v_BLHD, segment_ids_BL, stream_BH):
  operands = _Operands((q_BLHD, k_BLHD, v_BLHD), False, _no_bias(q_BLHD))
  out_BLHD, lse_BHL = _forward(options, operands, segment_ids_BL, stream_BH)
  return out_BLHD, (operands.arrays, (segment_ids_BL, stream_BH, out_BLHD, lse_BHL))


def _flash_backward(options, residuals, d_out_BLHD):
  arrays, rest = residuals
  operands = _Operands(arrays, False, _no_bias(arrays[0]))
  return *_backward(options, operands, rest, d_out_BLHD), None, None


_flash.defvjp(_flash_forward, _flash_backward)


def _packed(kvq_BLNHD, bias_NHD):
  # The bias in the operands' dtype, as `layers.add_bias` adds it; its gradient keeps its own.
  return _Operands((kvq_BLNHD,) * 3, True, bias_NHD.astype(kvq_BLNHD.dtype))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _flash_packed(options, kvq_BLNHD, bias_NHD, segment_ids_BL, stream_BH):
  return _forward(options, _packed(kvq_BLNHD, bias_NHD), segment_ids_BL, stream_BH)[0]


def _flash_packed_forward(options, kvq_BLNHD, bias_NHD, segment_ids_BL, stream_BH):
  out_BLHD, lse_BHL = _forward(options, _packed(kvq_BLNHD, bias_NHD), segment_ids_BL, stream_BH)
  return out_BLHD, (kvq_BLNHD, bias_NHD, (segment_ids_BL, stream_BH, out_BLHD, lse_BHL))


def _flash_packed_backward(options, residuals, d_out_BLHD):
  packed_BLNHD, bias_NHD, rest = residuals
  d_packed_BLNHD, d_bias_parts = _backward(
    options, _packed(packed_BLNHD, bias_NHD), rest, d_out_BLHD
  )
  d_bias_NHD = jnp.sum(d_bias_parts, axis=(0, 1)).astype(bias_NHD.dtype)
  return d_packed_BLNHD, d_bias_NHD, None, None


_flash_packed.defvjp(_flash_packed_forward, _flash_packed_backward)


def flash_attention(
  query_BLHD,
  key_BLHD,
  value_BLHD,
  segment_ids_BL,
  *,
  dropout_rate=0.0,
  dropout_rng=None,
  block=None,
  launch=None,
  interpret=None,
):
  """Scaled dot-product attention by the flash kernels, sharded over the current mesh.

  When compiling for TPU (`platform.current_platform`) the Mosaic kernels of `flash_tpu` run,
  elsewhere the Triton kernels; both give the same outputs and dropout mask. Under a mesh the
  batch and heads are split as `per_shard.call_per_shard` says; the hash of the dropout mask
  uses global batch and head indices, so sharding does not change it.

  Args:
    query_BLHD: queries [batch, length, heads, head_dim]; length a multiple of 16 (of 128 on
      TPU), head_dim a power of two in [16, 256].
    key_BLHD: keys, same shape and dtype.
    value_BLHD: values, same shape and dtype.
    segment_ids_BL: int [batch, length]; 0 is padding, equal positive ids may attend.
    dropout_rate: dropout on the attention probabilities, in [0, 1); 0 turns it off.
    dropout_rng: PRNG key for that dropout; needed when ``dropout_rate`` > 0.
    block: query/key block edge of every kernel (16, 32, 64 or 128, dividing the length; on
      TPU 128, 256 or 512); default: the largest of those that divides it (64 at most in the
      Triton backward).
    launch: the Triton kernels' `flash_launch.TritonLaunch` (not with ``block``; not on
      TPU); default: `flash_launch.default_launch`.
    interpret: run in Pallas interpret mode; default: unless compiling for a GPU or TPU.

  Returns:
    Attention output [batch, length, heads, head_dim] in the dtype of ``query_BLHD``; zero at
    padding queries.

  Raises:
    UserInputError: for a length or head_dim the kernels do not take.
  """
  batch, length, heads, head_dim = query_BLHD.shape
  _check(head_dim, dropout_rate, dropout_rng)
  platform = platform_lib.current_platform()
  if platform == "tpu":
    if launch is not None:
      raise ValueError("launch= sets the Triton kernels' launch; on TPU give block= instead")
    # Refuse unsupported lengths before tracing the kernels.
    attend = functools.partial(
      flash_tpu.attention,
      dropout_rate=dropout_rate,
      block=flash_tpu.block_size(length, block),
      interpret=bool(interpret),
    )
  else:
    options = flash_launch.kernel_options(
      length, head_dim, dropout_rate, block, launch, interpret, platform
    )
    attend = functools.partial(_flash, options)
  return per_shard.call_per_shard(
    attend,
    (
      query_BLHD,
      key_BLHD,
      value_BLHD,
      segment_ids_BL.astype(jnp.int32),
      _streams(dropout_rate, dropout_rng, batch, heads),
    ),
    ("BLHD", "BLHD", "BLHD", "BL", "BH"),
    "BLHD",
  )


def flash_attention_packed(
  kvq_BLNHD,
  segment_ids_BL,
  *,
  bias_NHD=None,
  dropout_rate=0.0,
  dropout_rng=None,
  block=None,
  launch=None,
  interpret=None,
):
  """`flash_attention` of the key, value and query packed in one [B, L, 3, H, D] array.

  The Triton kernels read the three in place and add their bias as they read them, and write
  the gradient packed the same way, the dK/dV kernel the key and value slots and the dQ kernel
  the query slot of one buffer: the projection's one product into [B, L, 3, H, D] feeds them
  and takes their gradient with no pass over either (slicing the three out and adding the bias
  cost BERT-base 0.9 ms of a 47 ms step on an H200, packing their gradients with the bias's
  reduction 1.25 ms). On TPU the three are sliced out for the Mosaic kernels.

  Args:
    kvq_BLNHD: keys, values and queries [batch, length, 3, heads, head_dim], in that order
      (`PACKED_SLOTS`).
    segment_ids_BL: as `flash_attention` takes them.
    bias_NHD: their bias [3, heads, head_dim] in the same order (any float dtype; added in
      the operands' dtype, its gradient summed in float32), or None.
    dropout_rate: as `flash_attention` takes it.
    dropout_rng: as `flash_attention` takes it.
    block: as `flash_attention` takes it.
    launch: as `flash_attention` takes it.
    interpret: as `flash_attention` takes it.

  Returns:
    Attention output [batch, length, heads, head_dim], as `flash_attention`'s.

  Raises:
    UserInputError: for a length or head_dim the kernels do not take.
  """
  batch, length, slots, heads, head_dim = kvq_BLNHD.shape
  if slots != 3:
    raise ValueError(f"kvq_BLNHD must be [B, L, 3, H, D], got {kvq_BLNHD.shape}")
  if bias_NHD is None:
    bias_NHD = jnp.zeros((3, heads, head_dim), kvq_BLNHD.dtype)
  platform = platform_lib.current_platform()
  if platform == "tpu":
    return flash_attention(
      *(layers.add_bias(kvq_BLNHD[:, :, slot], bias_NHD[slot]) for slot in PACKED_SLOTS),
      segment_ids_BL,
      dropout_rate=dropout_rate,
      dropout_rng=dropout_rng,
      block=block,
      launch=launch,
      interpret=interpret,
    )
  _check(head_dim, dropout_rate, dropout_rng)
  options = flash_launch.kernel_options(
    length, head_dim, dropout_rate, block, launch, interpret, platform
  )
  return per_shard.call_per_shard(
    functools.partial(_flash_packed, options),
    (
      kvq_BLNHD,
      bias_NHD,
      segment_ids_BL.astype(jnp.int32),
      _streams(dropout_rate, dropout_rng, batch, heads),
    ),
    ("BLNHD", "NHD", "BL", "BH"),
    "BLHD",
  )


def _check(head_dim: int, dropout_rate: float, dropout_rng):
  if head_dim not in config_lib.FLASH_HEAD_DIMS:
    raise UserInputError(
      f"attention_kind='flash' takes head_dim {', '.join(map(str, config_lib.FLASH_HEAD_DIMS))}"
      f", got head_dim={head_dim}; change model.num_heads or use model.attention_kind='dense'"
    )
  if not 0.0 <= dropout_rate < 1.0:
    raise ValueError(f"dropout_rate={dropout_rate} must be in [0, 1)")
  if dropout_rate > 0 and dropout_rng is None:
    raise ValueError("flash_attention with dropout_rate > 0 needs a dropout_rng")


def _streams(dropout_rate: float, dropout_rng, batch: int, heads: int):
  """The [B, H] dropout streams (zeros without dropout)."""
  if dropout_rate > 0:
    return flash_dropout.streams_BH(dropout_rng, batch, heads)
  return jnp.zeros((batch, heads), jnp.uint32)
