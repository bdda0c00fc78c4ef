"""The checks every pipeline's ``batches()`` runs on its request before building an iterator."""

from bert_jax.errors import UserInputError


def check_batch_request(
  split,
  splits,
  global_batch_size,
  process_index,
  process_count,
  start_position,
  *,
  whole_batches: bool = False,
):
  """Refuses a batch iterator request that no pipeline can serve (one line each).

  Args:
    split: the split asked for.
    splits: the splits the pipeline has.
    global_batch_size: B, over all processes.
    process_index: this process.
    process_count: number of processes; must divide B.
    start_position: the saved data position to start from.
    whole_batches: the position counts rows of whole global batches (segment streams), so it
      must be a multiple of B; else it counts examples.

  Raises:
    UserInputError: an unknown split, a global batch not split evenly over the processes,
      a process index out of range or a negative (or, with ``whole_batches``, partial-batch)
      start position.
  """
  if split not in splits:
    raise UserInputError(f"split is {split!r}; use one of {splits}")
  if global_batch_size < 1 or global_batch_size % process_count:
    raise UserInputError(
      f"global_batch_size {global_batch_size} is not a positive multiple of "
      f"process_count {process_count}; every process needs the same share of each batch"
    )
  if not 0 <= process_index < process_count:
    raise UserInputError(f"process_index {process_index} is not in [0, {process_count})")
  if whole_batches and (start_position < 0 or start_position % global_batch_size):
    raise UserInputError(
      f"start_position is {start_position}; it counts rows of whole global batches of "
      f"{global_batch_size} (was the run resumed with another global_batch_size?)"
    )
  if start_position < 0:
    raise UserInputError(f"start_position is {start_position}; it counts examples, so >= 0")
