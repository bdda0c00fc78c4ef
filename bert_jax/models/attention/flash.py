"""FlashAttention-2 in Pallas with attention dropout: Triton kernels here, Mosaic on TPU.

`flash_attention` is the one entry point: on TPU it runs `flash_tpu`'s Mosaic kernels, which
do the same maths with the same dropout mask; everywhere else the Triton kernels below.

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
from jax.experimental.pallas import triton as pltriton

from bert_jax.errors import UserInputError
from bert_jax.models import config as config_lib
from bert_jax.models import platform as platform_lib
from bert_jax.models.attention import blocks, flash_dropout, flash_tpu, masks, per_shard

# Query/key block edges: powers of two (Triton's tiles), at least 16 (its smallest product).
# The forward keeps one [block, block] float32 tile per program; the backward keeps three,
# hence its smaller blocks. Neither choice has been timed on a GPU yet.
_FORWARD_BLOCKS = (128, 64, 32, 16)
_BACKWARD_BLOCKS = (64, 32, 16)


def block_size(length: int, choices=_FORWARD_BLOCKS) -> int:
  """The largest block of ``choices`` that divides ``length``.

  Raises:
    UserInputError: when ``length`` is not a multiple of 16.
  """
  return blocks.largest_dividing(length, choices, "'flash'")


@dataclasses.dataclass(frozen=True)
class _Options:
  """Static settings of one attention call (hashable: a `jax.custom_vjp` nondiff argument)."""

  dropout_rate: float
  forward_block: int
  backward_block: int
  interpret: bool


def _compiler_params(block: int, head_dim: int):
  """Triton's launch settings for [block, head_dim] tiles (untuned: not yet timed on a GPU).

  Naming Triton's parameters is also what selects the Triton backend (not Mosaic GPU).
  """
  warps = 4 if block * head_dim <= 64 * 64 else 8
  return pltriton.CompilerParams(num_warps=warps, num_stages=2)


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


def _forward_kernel(
  q_ref, k_ref, v_ref, segment_ref, stream_ref, out_ref, lse_ref, *, options: _Options
):
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


def _key_gradients_kernel(
  q_ref, k_ref, v_ref, segment_ref, stream_ref, d_out_ref, lse_ref, delta_ref, dk_ref, dv_ref,
  *, options: _Options,
):  # fmt: skip
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
  dk_ref[...] = dk_KD.astype(dk_ref.dtype)
  dv_ref[...] = dv_KD.astype(dv_ref.dtype)


def _query_gradients_kernel(
  q_ref, k_ref, v_ref, segment_ref, stream_ref, d_out_ref, lse_ref, delta_ref, dq_ref,
  *, options: _Options,
):  # fmt: skip
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


def _specs(length: int, head_dim: int, block: int):
  """BlockSpecs over a (block, batch, head) grid: a block of [B, L, H, D], all of [B, L, H, D],
  a block of [B, H, L], all of [B, H, L], the [B, L] segment ids and the [B, H] streams."""
  return (
    pl.BlockSpec((None, block, None, head_dim), lambda i, b, h: (b, i, h, 0)),
    pl.BlockSpec((None, length, None, head_dim), lambda i, b, h: (b, 0, h, 0)),
    pl.BlockSpec((None, None, block), lambda i, b, h: (b, h, i)),
    pl.BlockSpec((None, None, length), lambda i, b, h: (b, h, 0)),
    pl.BlockSpec((None, length), lambda i, b, h: (b, 0)),
    pl.BlockSpec((None, None), lambda i, b, h: (b, h)),
  )


def _forward(options: _Options, q_BLHD, k_BLHD, v_BLHD, segment_ids_BL, stream_BH):
  batch, length, heads, head_dim = q_BLHD.shape
  block = options.forward_block
  tile, whole, row_tile, _, segments, stream = _specs(length, head_dim, block)
  out_BLHD, lse_BHL = pl.pallas_call(
    functools.partial(_forward_kernel, options=options),
    grid=(length // block, batch, heads),
    in_specs=[tile, whole, whole, segments, stream],
    out_specs=[tile, row_tile],
    out_shape=[
      jax.ShapeDtypeStruct(q_BLHD.shape, q_BLHD.dtype),
      jax.ShapeDtypeStruct((batch, heads, length), jnp.float32),
    ],
    compiler_params=_compiler_params(block, head_dim),
    interpret=options.interpret,
    name="flash_attention_forward",
  )(q_BLHD, k_BLHD, v_BLHD, segment_ids_BL, stream_BH)
  return out_BLHD, lse_BHL


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _flash(options, q_BLHD, k_BLHD, v_BLHD, segment_ids_BL, stream_BH):
  return _forward(options, q_BLHD, k_BLHD, v_BLHD, segment_ids_BL, stream_BH)[0]


def _flash_forward(options, q_BLHD, k_BLHD, v_BLHD, segment_ids_BL, stream_BH):
  out_BLHD, lse_BHL = _forward(options, q_BLHD, k_BLHD, v_BLHD, segment_ids_BL, stream_BH)
  return out_BLHD, (q_BLHD, k_BLHD, v_BLHD, segment_ids_BL, stream_BH, out_BLHD, lse_BHL)


def _flash_backward(options, residuals, d_out_BLHD):
  q_BLHD, k_BLHD, v_BLHD, segment_ids_BL, stream_BH, out_BLHD, lse_BHL = residuals
  batch, length, heads, head_dim = q_BLHD.shape
  block = options.backward_block
  tile, whole, row_tile, row, segments, stream = _specs(length, head_dim, block)
  d_out_BLHD = d_out_BLHD.astype(v_BLHD.dtype)  # The products take one operand dtype.
  delta_BHL = jnp.einsum(
    "blhd,blhd->bhl", d_out_BLHD.astype(jnp.float32), out_BLHD.astype(jnp.float32)
  )
  inputs = (q_BLHD, k_BLHD, v_BLHD, segment_ids_BL, stream_BH, d_out_BLHD, lse_BHL, delta_BHL)
  call = functools.partial(
    pl.pallas_call,
    grid=(length // block, batch, heads),
    compiler_params=_compiler_params(block, head_dim),
    interpret=options.interpret,
  )
  dk_BLHD, dv_BLHD = call(
    functools.partial(_key_gradients_kernel, options=options),
    in_specs=[whole, tile, tile, segments, stream, whole, row, row],
    out_specs=[tile, tile],
    out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in (k_BLHD, v_BLHD)],
    name="flash_attention_key_gradients",
  )(*inputs)
  dq_BLHD = call(
    functools.partial(_query_gradients_kernel, options=options),
    in_specs=[tile, whole, whole, segments, stream, tile, row_tile, row_tile],
    out_specs=tile,
    out_shape=jax.ShapeDtypeStruct(q_BLHD.shape, q_BLHD.dtype),
    name="flash_attention_query_gradients",
  )(*inputs)
  return dq_BLHD, dk_BLHD, dv_BLHD, None, None


_flash.defvjp(_flash_forward, _flash_backward)


def _options(length: int, dropout_rate: float, block, interpret, platform: str) -> _Options:
  """The Triton kernels' settings; ``block`` and ``interpret`` as `flash_attention` takes them."""
  forward_block, backward_block = block_size(length), block_size(length, _BACKWARD_BLOCKS)
  if block is not None:
    if block not in _FORWARD_BLOCKS or length % block:
      raise ValueError(f"block={block} must be one of {_FORWARD_BLOCKS} and divide {length}")
    forward_block = backward_block = block
  if interpret is None:
    interpret = platform != "gpu"
  return _Options(dropout_rate, forward_block, backward_block, interpret)


def flash_attention(
  query_BLHD,
  key_BLHD,
  value_BLHD,
  segment_ids_BL,
  *,
  dropout_rate=0.0,
  dropout_rng=None,
  block=None,
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
    interpret: run in Pallas interpret mode; default: unless compiling for a GPU or TPU.

  Returns:
    Attention output [batch, length, heads, head_dim] in the dtype of ``query_BLHD``; zero at
    padding queries.

  Raises:
    UserInputError: for a length or head_dim the kernels do not take.
  """
  batch, length, heads, head_dim = query_BLHD.shape
  if head_dim not in config_lib.FLASH_HEAD_DIMS:
    raise UserInputError(
      f"attention_kind='flash' takes head_dim {', '.join(map(str, config_lib.FLASH_HEAD_DIMS))}"
      f", got head_dim={head_dim}; change model.num_heads or use model.attention_kind='dense'"
    )
  if not 0.0 <= dropout_rate < 1.0:
    raise ValueError(f"dropout_rate={dropout_rate} must be in [0, 1)")
  if dropout_rate > 0 and dropout_rng is None:
    raise ValueError("flash_attention with dropout_rate > 0 needs a dropout_rng")
  platform = platform_lib.current_platform()
  if platform == "tpu":
    # Refuse unsupported lengths before tracing the kernels.
    attend = functools.partial(
      flash_tpu.attention,
      dropout_rate=dropout_rate,
      block=flash_tpu.block_size(length, block),
      interpret=bool(interpret),
    )
  else:
    attend = functools.partial(_flash, _options(length, dropout_rate, block, interpret, platform))
  if dropout_rate > 0:
    stream_BH = flash_dropout.streams_BH(dropout_rng, batch, heads)
  else:
    stream_BH = jnp.zeros((batch, heads), jnp.uint32)
  return per_shard.call_per_shard(
    attend,
    (query_BLHD, key_BLHD, value_BLHD, segment_ids_BL.astype(jnp.int32), stream_BH),
    ("BLHD", "BLHD", "BLHD", "BL", "BH"),
    "BLHD",
  )
