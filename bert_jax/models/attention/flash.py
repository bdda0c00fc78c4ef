"""FlashAttention-2 in Pallas with attention dropout: Triton kernels here, Mosaic on TPU.

`flash_attention` is the entry point (`flash_attention_packed` the same for a packed
query/key/value array): on TPU it runs `flash_tpu`'s Mosaic kernels, which do the same maths
with the same dropout mask; everywhere else the Triton kernels below.

The kernel bodies are in `flash_kernels`, their launch settings in `flash_launch`, the Pallas
calls (which blocks of which arrays each kernel program sees) in `flash_calls`; this module
holds their custom VJPs and the entry points.

Requirements: head_dim a power of two in [16, 256] and a length that is a multiple of 16 (the
smallest block Triton's products take; 128 on TPU). Off GPU and TPU the Triton kernels run in
Pallas interpret mode (slow; for tests and CPU debugging). Under a mesh either platform's
kernels run per shard (`per_shard`).
"""

import functools

import jax
import jax.numpy as jnp

from bert_jax.errors import UserInputError
from bert_jax.models import layers, per_shard
from bert_jax.models import platform as platform_lib
from bert_jax.models.attention import blocks, flash_calls, flash_dropout, flash_launch, flash_tpu


def _no_bias(operand_BLHD):
  return jnp.zeros((3,) + operand_BLHD.shape[2:], operand_BLHD.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _flash(options, q_BLHD, k_BLHD, v_BLHD, segment_ids_BL, stream_BH):
  operands = flash_calls.Operands((q_BLHD, k_BLHD, v_BLHD), False, _no_bias(q_BLHD))
  return flash_calls.forward(options, operands, segment_ids_BL, stream_BH)[0]


def _flash_forward(options, q_BLHD, k_BLHD, v_BLHD, segment_ids_BL, stream_BH):
  operands = flash_calls.Operands((q_BLHD, k_BLHD, v_BLHD), False, _no_bias(q_BLHD))
  out_BLHD, lse_BHL = flash_calls.forward(options, operands, segment_ids_BL, stream_BH)
  return out_BLHD, (operands.arrays, (segment_ids_BL, stream_BH, out_BLHD, lse_BHL))


def _flash_backward(options, residuals, d_out_BLHD):
  arrays, rest = residuals
  operands = flash_calls.Operands(arrays, False, _no_bias(arrays[0]))
  return *flash_calls.backward(options, operands, rest, d_out_BLHD), None, None


_flash.defvjp(_flash_forward, _flash_backward)


def _packed(kvq_BLNHD, bias_NHD):
  # The bias in the operands' dtype, as `layers.add_bias` adds it; its gradient keeps its own.
  return flash_calls.Operands((kvq_BLNHD,) * 3, True, bias_NHD.astype(kvq_BLNHD.dtype))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _flash_packed(options, kvq_BLNHD, bias_NHD, segment_ids_BL, stream_BH):
  return flash_calls.forward(options, _packed(kvq_BLNHD, bias_NHD), segment_ids_BL, stream_BH)[0]


def _flash_packed_forward(options, kvq_BLNHD, bias_NHD, segment_ids_BL, stream_BH):
  out_BLHD, lse_BHL = flash_calls.forward(
    options, _packed(kvq_BLNHD, bias_NHD), segment_ids_BL, stream_BH
  )
  return out_BLHD, (kvq_BLNHD, bias_NHD, (segment_ids_BL, stream_BH, out_BLHD, lse_BHL))


def _flash_packed_backward(options, residuals, d_out_BLHD):
  packed_BLNHD, bias_NHD, rest = residuals
  d_packed_BLNHD, d_bias_parts = flash_calls.backward(
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
      (`flash_calls.PACKED_SLOTS`).
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
      *(
        layers.add_bias(kvq_BLNHD[:, :, slot], bias_NHD[slot]) for slot in flash_calls.PACKED_SLOTS
      ),
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
  if head_dim not in blocks.FLASH_HEAD_DIMS:
    raise UserInputError(
      f"attention_kind='flash' takes head_dim {', '.join(map(str, blocks.FLASH_HEAD_DIMS))}"
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
