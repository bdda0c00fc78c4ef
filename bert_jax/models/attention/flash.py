"""FlashAttention-2 in Pallas with attention dropout: Triton kernels here, Mosaic on TPU.

`flash_attention` is the entry point (`flash_attention_packed` the same for a packed
query/key/value array): on TPU it runs `flash_tpu`'s Mosaic kernels, which do the same maths
with the same dropout mask; everywhere else the Triton kernels below.

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
from bert_jax.models import layers
from bert_jax.models import platform as platform_lib
from bert_jax.models.attention import blocks, flash_dropout, flash_tpu, masks, per_shard

# Query/key block edges: powers of two (Triton's tiles), at least its smallest product's.
# The forward keeps one [block, block] float32 tile per program; the backward keeps three,
# hence its smaller blocks.
_FORWARD_BLOCKS = (128, 64, 32, blocks.TRITON_MIN_BLOCK)
_BACKWARD_BLOCKS = (64, 32, blocks.TRITON_MIN_BLOCK)


def block_size(length: int, choices=_FORWARD_BLOCKS) -> int:
  """The largest block of ``choices`` that divides ``length``.

  Raises:
    UserInputError: when ``length`` is not a multiple of 16.
  """
  return blocks.largest_dividing(length, choices, "'flash'")


@dataclasses.dataclass(frozen=True)
class TritonLaunch:
  """How the Triton kernels are launched: the query/key block edge and Triton's warps per
  program of the forward and of the two backward kernels, and the software-pipelining stages.

  Written and parsed as ``FORWARD_BLOCK/FORWARD_WARPS/BACKWARD_BLOCK/BACKWARD_WARPS/STAGES``
  (`tools/benchmark_gpu_attention --flash_launch` times such settings side by side).
  """

  forward_block: int
  forward_warps: int
  backward_block: int
  backward_warps: int
  stages: int = 2

  def __str__(self):
    return "/".join(str(getattr(self, f.name)) for f in dataclasses.fields(self))

  @classmethod
  def parse(cls, text: str) -> "TritonLaunch":
    """A launch from its written form.

    Raises:
      UserInputError: when ``text`` is not five positive integers joined by "/".
    """
    parts = text.split("/")
    if len(parts) != 5 or not all(part.isdigit() and int(part) > 0 for part in parts):
      raise UserInputError(
        f"flash launch {text!r}: write FORWARD_BLOCK/FORWARD_WARPS/BACKWARD_BLOCK/"
        "BACKWARD_WARPS/STAGES, e.g. 128/8/64/4/2"
      )
    return cls(*map(int, parts))

  def check(self, length: int):
    """Raises ValueError unless the blocks are powers of two from 16 that divide ``length``
    and the warps powers of two."""
    for block in (self.forward_block, self.backward_block):
      if block < blocks.TRITON_MIN_BLOCK or block & (block - 1) or length % block:
        raise ValueError(
          f"flash launch {self}: block {block} must be a power of two >= 16 "
          f"that divides the length {length}"
        )
    for warps in (self.forward_warps, self.backward_warps):
      if warps & (warps - 1):
        raise ValueError(f"flash launch {self}: {warps} warps is not a power of two")


def default_launch(length: int, head_dim: int) -> TritonLaunch:
  """The launch the kernels use unless told otherwise: the largest blocks that divide the
  length (64 at most in the backward, which keeps three float32 tiles), 8 warps for tiles
  over 64 x 64 elements, else 4, and 2 stages. Timed on an H200 only as a whole (one
  BERT-base layer, 256 x 128, dropout 0.1: 0.78 ms forward + backward, stop 30)."""

  def warps(block):
    return 4 if block * head_dim <= 64 * 64 else 8

  forward, backward = block_size(length), block_size(length, _BACKWARD_BLOCKS)
  return TritonLaunch(forward, warps(forward), backward, warps(backward))


@dataclasses.dataclass(frozen=True)
class _Options:
  """Static settings of one attention call (hashable: a `jax.custom_vjp` nondiff argument)."""

  dropout_rate: float
  launch: TritonLaunch
  interpret: bool

  @property
  def forward_block(self):
    return self.launch.forward_block

  @property
  def backward_block(self):
    return self.launch.backward_block

  def compiler_params(self, backward: bool):
    """Triton's launch settings of the forward or the backward kernels. Naming Triton's
    parameters is also what selects the Triton backend (not Mosaic GPU)."""
    warps = self.launch.backward_warps if backward else self.launch.forward_warps
    return pltriton.CompilerParams(num_warps=warps, num_stages=self.launch.stages)


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


def _forward_kernel(
  q_ref, k_ref, v_ref, q_bias_ref, k_bias_ref, v_bias_ref, segment_ref, stream_ref, out_ref,
  lse_ref, *, options: _Options,
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


def _key_gradients_kernel(
  q_ref, k_ref, v_ref, q_bias_ref, k_bias_ref, v_bias_ref, segment_ref, stream_ref, d_out_ref,
  lse_ref, delta_ref, *out_refs, options: _Options,
):  # fmt: skip
  """``out_refs``: the dK and dV blocks, or one [block, 2, D] block of a packed gradient's key
  and value slots."""
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
  if len(out_refs) == 1:
    (packed_ref,) = out_refs
    packed_ref[:, 0, :] = dk_KD.astype(packed_ref.dtype)
    packed_ref[:, 1, :] = dv_KD.astype(packed_ref.dtype)
  else:
    dk_ref, dv_ref = out_refs
    dk_ref[...] = dk_KD.astype(dk_ref.dtype)
    dv_ref[...] = dv_KD.astype(dv_ref.dtype)


def _query_gradients_kernel(
  q_ref, k_ref, v_ref, q_bias_ref, k_bias_ref, v_bias_ref, segment_ref, stream_ref, d_out_ref,
  lse_ref, delta_ref, *out_refs, options: _Options,
):  # fmt: skip
  """``out_refs``: the dQ block; or the packed gradient the dK/dV kernel wrote (aliased to the
  output, not read) and the query slot's block of it."""
  dq_ref = out_refs[-1]
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


def _forward(options: _Options, operands: _Operands, segment_ids_BL, stream_BH):
  batch, length, heads, head_dim = operands.shape_BLHD
  block = options.forward_block
  row_tile, _, segments, stream = _specs(length, head_dim, block)
  ((q_tile, _), (_, k_whole), (_, v_whole)), biases = operands.specs(block)
  dtype = operands.arrays[0].dtype
  out_tile = _operand_specs(length, head_dim, block, None)[0]
  out_BLHD, lse_BHL = pl.pallas_call(
    functools.partial(_forward_kernel, options=options),
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


def _backward(options: _Options, operands: _Operands, residuals, d_out_BLHD):
  """(dq, dk, dv), each [B, L, H, D] in the operands' dtype; for packed operands, their
  gradient packed the same way."""
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
    # copied or packed after the kernels.
    packed_gradient = jax.ShapeDtypeStruct(operands.arrays[0].shape, dtype)
    key_value_out = {
      "out_specs": pl.BlockSpec((None, block, 2, None, head_dim), lambda i, b, h: (b, i, 0, h, 0)),
      "out_shape": packed_gradient,
    }
    query_out = {
      "in_specs": [*query_specs, pl.BlockSpec(memory_space=pl.ANY)],
      "out_specs": _operand_specs(length, head_dim, block, PACKED_SLOTS[0])[0],
      "out_shape": packed_gradient,
      "input_output_aliases": {len(inputs): 0},
    }
  key_value = call(
    functools.partial(_key_gradients_kernel, options=options),
    in_specs=[q_whole, k_tile, v_tile, *biases, segments, stream, whole, row, row],
    name="flash_attention_key_gradients",
    **key_value_out,
  )(*inputs)
  query_inputs = (*inputs, key_value) if operands.packed else inputs
  query = call(
    functools.partial(_query_gradients_kernel, options=options),
    name="flash_attention_query_gradients",
    **query_out,
  )(*query_inputs)
  return query if operands.packed else (query, *key_value)


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
  d_packed_BLNHD = _backward(options, _packed(packed_BLNHD, bias_NHD), rest, d_out_BLHD)
  d_bias_NHD = jnp.sum(d_packed_BLNHD.astype(jnp.float32), axis=(0, 1)).astype(bias_NHD.dtype)
  return d_packed_BLNHD, d_bias_NHD, None, None


_flash_packed.defvjp(_flash_packed_forward, _flash_packed_backward)


def _options(
  length: int, head_dim: int, dropout_rate: float, block, launch, interpret, platform: str
) -> _Options:
  """The Triton kernels' settings; ``block``, ``launch`` and ``interpret`` as
  `flash_attention` takes them."""
  if block is not None and launch is not None:
    raise ValueError("flash_attention takes block or launch, not both")
  if launch is None:
    launch = default_launch(length, head_dim)
  if block is not None:
    if block not in _FORWARD_BLOCKS or length % block:
      raise ValueError(f"block={block} must be one of {_FORWARD_BLOCKS} and divide {length}")
    launch = dataclasses.replace(launch, forward_block=block, backward_block=block)
  launch.check(length)
  if interpret is None:
    interpret = platform != "gpu"
  return _Options(dropout_rate, launch, interpret)


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
    launch: the Triton kernels' `TritonLaunch` (not with ``block``; not on TPU); default:
      `default_launch`.
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
    options = _options(length, head_dim, dropout_rate, block, launch, interpret, platform)
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
  options = _options(length, head_dim, dropout_rate, block, launch, interpret, platform)
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
