"""The window of chunked attention (lsh, local): the chunk length and the neighbouring chunks.

One set of checks for the config (`LshOptions`, whose errors name the ``model.lsh.*`` keys) and
for the kernels (`local.local_attention`, `lsh_hashing.validate`, whose errors name their
arguments).
"""

from bert_jax.errors import UserInputError


def check_window(chunk_len: int, n_chunks_before: int, n_chunks_after: int, *, prefix: str = ""):
  """Checks the sizes of a chunk and of its window.

  Args:
    chunk_len: positions per chunk.
    n_chunks_before: earlier chunks each chunk also attends to.
    n_chunks_after: later chunks each chunk also attends to.
    prefix: what the errors put before each name: ``"model.lsh."`` for the config's keys,
      nothing for a kernel's arguments.

  Raises:
    UserInputError: for a chunk length below 1 or a negative neighbour count.
  """
  if chunk_len < 1:
    raise UserInputError(f"{prefix}chunk_len={chunk_len} must be >= 1; typical values are 64-256")
  if n_chunks_before < 0 or n_chunks_after < 0:
    raise UserInputError(
      f"{prefix}n_chunks_before={n_chunks_before} and {prefix}n_chunks_after={n_chunks_after} "
      "must be >= 0; use 0 for no neighbour on that side"
    )


def check_whole_chunks(length: int, chunk_len: int):
  """Checks that a sequence of ``length`` positions splits into whole chunks.

  Raises:
    UserInputError: when ``length`` is not a multiple of ``chunk_len``.
  """
  if length % chunk_len:
    raise UserInputError(
      f"sequence length {length} is not a multiple of chunk_len {chunk_len}; "
      "pad the sequence to a multiple of chunk_len."
    )
