"""How the Triton flash kernels (`flash_kernels`) are launched: their query/key blocks, Triton's
warps and pipelining stages, and the static settings of one attention call."""

import dataclasses

from jax.experimental.pallas import triton as pltriton

from bert_jax.errors import UserInputError
from bert_jax.models.attention import blocks

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
  (`bench/benchmark_gpu_attention --flash_launch` times such settings side by side).
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
  BERT-base layer, 256 x 128, dropout 0.1: 0.78 ms forward + backward, 2026-11-28)."""

  def warps(block):
    return 4 if block * head_dim <= 64 * 64 else 8

  forward, backward = block_size(length), block_size(length, _BACKWARD_BLOCKS)
  return TritonLaunch(forward, warps(forward), backward, warps(backward))


@dataclasses.dataclass(frozen=True)
class Options:
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


def kernel_options(
  length: int, head_dim: int, dropout_rate: float, block, launch, interpret, platform: str
) -> Options:
  """The Triton kernels' settings of one call; ``block``, ``launch`` and ``interpret`` as
  `flash.flash_attention` takes them.

  Raises:
    ValueError: for both ``block`` and ``launch``, or blocks the length does not take.
    UserInputError: for a length no block divides.
  """
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
  return Options(dropout_rate, launch, interpret)
