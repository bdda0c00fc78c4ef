"""The block edge of a tiled attention kernel: the largest it takes that divides the length."""

from bert_jax.errors import UserInputError

# A TPU vector register's lane count: the Pallas TPU kernels tile lengths in multiples of it.
TPU_LANES = 128
# Triton's smallest matrix product edge: the Triton flash kernels tile lengths in multiples of it.
TRITON_MIN_BLOCK = 16
# Head sizes the flash kernels take (GPU and TPU alike): powers of two (Triton's tiles), 16 at
# least (its products).
FLASH_HEAD_DIMS = (16, 32, 64, 128, 256)


def largest_dividing(length: int, choices, kernel: str) -> int:
  """The largest of ``choices`` that divides ``length``.

  Args:
    length: the sequence length.
    choices: the block edges a kernel takes, each a multiple of the smallest.
    kernel: the attention kind as the error names it, e.g. ``'splash'`` or ``'flash' on TPU``.

  Returns:
    The block edge.

  Raises:
    UserInputError: when none divides ``length``, naming the next length that works.
  """
  for block in sorted(choices, reverse=True):
    if length % block == 0:
      return block
  multiple = min(choices)
  raise UserInputError(
    f"attention_kind={kernel} needs a sequence length that is a multiple of {multiple}, got "
    f"{length}; use e.g. data.max_seq_length={-(-length // multiple) * multiple} or "
    "model.attention_kind='dense'"
  )
