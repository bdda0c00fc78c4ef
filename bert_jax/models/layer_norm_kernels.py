"""Layer normalisation's forward and backward passes as Triton kernels (Pallas), for NVIDIA GPUs.

XLA compiles a layer norm over [rows, H] into three kernels forward (the row sums, the
reciprocal standard deviation, the normalised output: the input read twice) and five backward
(two row sums reading the input and the output gradient, then the input gradient and the
per-column partial sums of the parameters' gradients reading both again): about 400 MB of
traffic per norm of BERT-base at 256 x 128 in bf16, where one pass each way needs 250 MB
(`tools/aot_compile --topology=h100-1` with an HLO dump). These kernels make one pass each:

- forward: each program normalises ``block_rows`` whole rows held in registers, writing the
  output and each row's float32 mean and 1 / std;
- backward: each program walks ``rows_per_program`` rows, ``block_rows`` at a time, writing the
  input gradient and accumulating the scale's and bias's gradients in registers; it writes one
  float32 row of each per program, which XLA sums (2% of the traffic at BERT-base's sizes).

Triton takes arrays whose sizes are powers of two, so a row of H values is loaded into the next
power of two with the missing lanes masked (768 -> 1024). Statistics are float32; the variance
is the mean of squared deviations from the row's mean, which the row in registers makes free
(XLA's path, Flax's, uses E[x²] − E[x]²).
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from bert_jax.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class Launch:
  """How the kernels are launched (hashable: part of a `jax.custom_vjp` nondiff argument).

  Not yet timed on a GPU: the defaults keep 32 float32 values of each [block_rows, lanes] tile
  per thread at H = 768 (1024 lanes, 4 warps), as Triton's own layer-norm tutorial sizes them.
  """

  forward_rows: int = 4
  forward_warps: int = 4
  backward_rows: int = 4
  backward_rows_per_program: int = 64
  backward_warps: int = 4

  def __str__(self):
    return "/".join(str(getattr(self, f.name)) for f in dataclasses.fields(self))

  @classmethod
  def parse(cls, text: str) -> "Launch":
    """A launch from its written form, ``FORWARD_ROWS/FORWARD_WARPS/BACKWARD_ROWS/
    BACKWARD_ROWS_PER_PROGRAM/BACKWARD_WARPS`` (`bench/benchmark_gpu_layer_norm --norm_launch`).

    Raises:
      UserInputError: unless five powers of two, the backward's rows dividing its rows per
        program.
    """
    parts = text.split("/")
    numbers = [int(part) for part in parts if part.isdigit()]
    if len(parts) != 5 or len(numbers) != 5 or any(n < 1 or n & (n - 1) for n in numbers):
      raise UserInputError(
        f"layer norm launch {text!r}: write five powers of two FORWARD_ROWS/FORWARD_WARPS/"
        "BACKWARD_ROWS/BACKWARD_ROWS_PER_PROGRAM/BACKWARD_WARPS, e.g. 4/4/4/64/4"
      )
    launch = cls(*numbers)
    if launch.backward_rows > launch.backward_rows_per_program:
      raise UserInputError(
        f"layer norm launch {text!r}: BACKWARD_ROWS {launch.backward_rows} exceeds "
        f"BACKWARD_ROWS_PER_PROGRAM {launch.backward_rows_per_program}"
      )
    return launch


@dataclasses.dataclass(frozen=True)
class Options:
  """How the kernels run: their launch, and whether in Pallas interpret mode (slow; for tests
  and CPU debugging)."""

  launch: Launch = Launch()
  interpret: bool = False


def _largest_dividing(rows: int, most: int) -> int:
  """The largest power of two up to ``most`` that divides ``rows``."""
  block = most
  while rows % block:
    block //= 2
  return block


def _lanes(width: int):
  """The loaded width (a power of two) and the mask of real columns (None when all are)."""
  lanes = pl.next_power_of_2(width)
  return lanes, (None if lanes == width else (jnp.arange(lanes) < width))


def _load(ref, rows, lanes, column_mask):
  """``ref[rows]`` (rows: a slice, or () for a vector) over ``lanes`` columns in float32,
  masked columns as 0."""
  index = (*rows, pl.ds(0, lanes))
  if column_mask is None:
    return ref[index].astype(jnp.float32)
  shape = tuple(s.size for s in rows) + (lanes,)
  mask = jnp.broadcast_to(column_mask, shape)
  return pltriton.load(ref.at[index], mask=mask, other=0).astype(jnp.float32)


def _store(ref, rows, value, column_mask):
  """``ref[rows] = value`` (in ``ref``'s dtype) where ``column_mask`` holds."""
  index = (*rows, pl.ds(0, value.shape[-1]))
  if column_mask is None:
    ref[index] = value.astype(ref.dtype)
    return
  mask = jnp.broadcast_to(column_mask, value.shape)
  pltriton.store(ref.at[index], value.astype(ref.dtype), mask=mask)


def _forward_kernel(x_ref, scale_ref, bias_ref, y_ref, mean_ref, inv_std_ref, *, epsilon):
  width = x_ref.shape[-1]
  lanes, column_mask = _lanes(width)
  rows = (pl.ds(0, x_ref.shape[0]),)
  x_RH = _load(x_ref, rows, lanes, column_mask)
  mean_R = jnp.sum(x_RH, axis=1) / width
  centred_RH = x_RH - mean_R[:, None]
  if column_mask is not None:
    centred_RH = jnp.where(column_mask[None, :], centred_RH, 0.0)
  inv_std_R = jax.lax.rsqrt(jnp.sum(centred_RH * centred_RH, axis=1) / width + epsilon)
  scale_H = _load(scale_ref, (), lanes, column_mask)
  bias_H = _load(bias_ref, (), lanes, column_mask)
  y_RH = centred_RH * inv_std_R[:, None] * scale_H[None, :] + bias_H[None, :]
  _store(y_ref, rows, y_RH, column_mask)
  mean_ref[...] = mean_R
  inv_std_ref[...] = inv_std_R


def _backward_kernel(
  x_ref, mean_ref, inv_std_ref, scale_ref, d_y_ref, d_x_ref, d_scale_ref, d_bias_ref, *,
  block_rows,
):  # fmt: skip
  width = x_ref.shape[-1]
  lanes, column_mask = _lanes(width)
  scale_H = _load(scale_ref, (), lanes, column_mask)

  def rows_step(step, sums):
    d_scale_H, d_bias_H = sums
    rows = (pl.ds(step * block_rows, block_rows),)
    x_RH = _load(x_ref, rows, lanes, column_mask)
    d_y_RH = _load(d_y_ref, rows, lanes, column_mask)
    inv_std_R = inv_std_ref[rows]
    normalized_RH = (x_RH - mean_ref[rows][:, None]) * inv_std_R[:, None]
    if column_mask is not None:
      normalized_RH = jnp.where(column_mask[None, :], normalized_RH, 0.0)
    d_normalized_RH = d_y_RH * scale_H[None, :]
    # Remove d_normalized's mean and its projection on the normalised row, scale by 1 / std.
    mean_d_R = jnp.sum(d_normalized_RH, axis=1) / width
    projection_R = jnp.sum(d_normalized_RH * normalized_RH, axis=1) / width
    d_x_RH = inv_std_R[:, None] * (
      d_normalized_RH - mean_d_R[:, None] - normalized_RH * projection_R[:, None]
    )
    _store(d_x_ref, rows, d_x_RH, column_mask)
    return (
      d_scale_H + jnp.sum(d_y_RH * normalized_RH, axis=0),
      d_bias_H + jnp.sum(d_y_RH, axis=0),
    )

  zeros_H = jnp.zeros((lanes,), jnp.float32)
  steps = x_ref.shape[0] // block_rows
  d_scale_H, d_bias_H = jax.lax.fori_loop(0, steps, rows_step, (zeros_H, zeros_H))
  first_row = (pl.ds(0, 1),)
  _store(d_scale_ref, first_row, d_scale_H[None, :], column_mask)
  _store(d_bias_ref, first_row, d_bias_H[None, :], column_mask)


def forward(x_RH, scale_H, bias_H, epsilon: float, dtype, options: Options):
  """Normalises each row of ``x_RH``.

  Args:
    x_RH: [rows, H] input in any float dtype.
    scale_H: [H] float32 gain.
    bias_H: [H] float32 offset.
    epsilon: added to the variance.
    dtype: the output's dtype.
    options: launch and interpret mode.

  Returns:
    ([rows, H] output in ``dtype``, [rows] float32 means, [rows] float32 1 / std).
  """
  rows, width = x_RH.shape
  block = _largest_dividing(rows, options.launch.forward_rows)
  row_block = pl.BlockSpec((block, width), lambda i: (i, 0))
  row_stat = pl.BlockSpec((block,), lambda i: (i,))
  whole = pl.BlockSpec((width,), lambda i: (0,))
  return pl.pallas_call(
    functools.partial(_forward_kernel, epsilon=epsilon),
    grid=(rows // block,),
    in_specs=[row_block, whole, whole],
    out_specs=[row_block, row_stat, row_stat],
    out_shape=[
      jax.ShapeDtypeStruct((rows, width), dtype),
      jax.ShapeDtypeStruct((rows,), jnp.float32),
      jax.ShapeDtypeStruct((rows,), jnp.float32),
    ],
    compiler_params=pltriton.CompilerParams(num_warps=options.launch.forward_warps, num_stages=1),
    interpret=options.interpret,
    name="layer_norm_forward",
  )(x_RH, scale_H, bias_H)


def backward(x_RH, mean_R, inv_std_R, scale_H, d_y_RH, options: Options):
  """Gradients of `forward`'s output with respect to its input, scale and bias.

  Args:
    x_RH: [rows, H] the forward's input.
    mean_R: [rows] float32 means from `forward`.
    inv_std_R: [rows] float32 1 / std from `forward`.
    scale_H: [H] float32 gain.
    d_y_RH: [rows, H] the output's gradient.
    options: as `forward` took them.

  Returns:
    ([rows, H] input gradient in ``x_RH``'s dtype, [H] float32 scale and bias gradients).
  """
  rows, width = x_RH.shape
  launch = options.launch
  per_program = _largest_dividing(rows, launch.backward_rows_per_program)
  block = _largest_dividing(per_program, launch.backward_rows)
  programs = rows // per_program
  row_block = pl.BlockSpec((per_program, width), lambda i: (i, 0))
  row_stat = pl.BlockSpec((per_program,), lambda i: (i,))
  per_program_sum = pl.BlockSpec((1, width), lambda i: (i, 0))
  d_x_RH, d_scale_PH, d_bias_PH = pl.pallas_call(
    functools.partial(_backward_kernel, block_rows=block),
    grid=(programs,),
    in_specs=[row_block, row_stat, row_stat, pl.BlockSpec((width,), lambda i: (0,)), row_block],
    out_specs=[row_block, per_program_sum, per_program_sum],
    out_shape=[
      jax.ShapeDtypeStruct((rows, width), x_RH.dtype),
      jax.ShapeDtypeStruct((programs, width), jnp.float32),
      jax.ShapeDtypeStruct((programs, width), jnp.float32),
    ],
    compiler_params=pltriton.CompilerParams(num_warps=launch.backward_warps, num_stages=2),
    interpret=options.interpret,
    name="layer_norm_backward",
  )(x_RH, mean_R, inv_std_R, scale_H, d_y_RH)
  return d_x_RH, jnp.sum(d_scale_PH, axis=0), jnp.sum(d_bias_PH, axis=0)
