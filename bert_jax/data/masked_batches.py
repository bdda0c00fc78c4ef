"""tf.data batching of unmasked pretraining examples: dynamic masking, batches, prefetch.

Both sources (in-memory text and TFRecords) end here, so the masking graph, the tf.data options
and the iterator that counts the data position exist once.
"""

import os

import numpy as np

from bert_jax import environment
from bert_jax.data import masking, record_format
from bert_jax.errors import UserInputError

tf = environment.import_tensorflow_for_data()

# tf.data threads masking examples, and masked batches kept ready ahead of the trainer.
PARALLEL_CALLS = max(2, min(os.cpu_count() or 2, 16))
_PREFETCH_BATCHES = 4
# Steps whose unmasked examples `batches_by_index` assembles at once.
_STEPS_PER_CHUNK = 64


class PretrainingBatches:
  """Iterator over host-local batches that tracks the global data position."""

  def __init__(self, datasets, *, start_position, global_batch_size, num_batches):
    """Args: datasets: an iterable of tf.data datasets whose batches are read in turn."""
    self._datasets = iter(datasets)
    self._iterator = iter(())
    self._position = start_position
    self._global_batch_size = global_batch_size
    self._num_batches = num_batches

  @property
  def position(self):
    """Global examples consumed: the value to checkpoint and pass back as ``start_position``."""
    return self._position

  @property
  def num_batches(self):
    """Batches left to yield for a finite (eval) iterator; None for train."""
    return self._num_batches

  def __iter__(self):
    return self

  def _next_batch(self):
    while True:
      try:
        return next(self._iterator)
      except StopIteration:
        self._iterator = next(self._datasets).as_numpy_iterator()  # Ends when they do.

  def __next__(self):
    try:
      batch = self._next_batch()
    except tf.errors.DataLossError as e:
      raise record_format.corrupt_record_error(e) from None
    except tf.errors.InvalidArgumentError as e:
      raise UserInputError(
        f"a TFRecord does not hold the expected features of length data.max_seq_length "
        f"({str(e.message).splitlines()[0]}); re-create the records with "
        "python -m bert_jax.tools.create_pretraining_data"
      ) from None
    self._position += self._global_batch_size
    if self._num_batches is not None:
      self._num_batches -= 1
    return batch


def batches_by_index(
  examples_at,
  mask_fn,
  *,
  start_position,
  process_index,
  process_count,
  global_batch_size,
  num_batches,
):
  """This host's batches of examples computed from their global index (resumable, sharded).

  Global batch ``k`` after ``start_position`` holds examples ``[s + k*B, s + (k+1)*B)``; this
  process takes its ``B / process_count`` slice of each. The main thread assembles the unmasked
  examples of `_STEPS_PER_CHUNK` steps in numpy; tf.data then only runs graph ops (masking,
  batching, prefetch) on them. Python code on tf.data's own threads (tf.numpy_function) would
  need the GIL while the consumer holds it, which stalls iterator teardown for up to a minute.

  Args:
    examples_at: int64 global indices [n] -> {key: numpy array [n, ...]} of unmasked examples.
    mask_fn: from `make_mask_fn` (or any per-example map that drops ``example_index``).
    start_position: global examples already consumed.
    process_index: this process, in [0, process_count).
    process_count: number of processes; each reads ``B / process_count`` of every batch.
    global_batch_size: B.
    num_batches: batches to yield (a finite eval split); None = endless.

  Returns:
    A `PretrainingBatches`.
  """
  host_batch_size = global_batch_size // process_count
  first_index = start_position + process_index * host_batch_size

  def chunk_datasets():
    step = 0
    while num_batches is None or step < num_batches:
      stop = step + _STEPS_PER_CHUNK
      if num_batches is not None:
        stop = min(stop, num_batches)
      blocks = []
      for s in range(step, stop):
        indices = first_index + s * global_batch_size + np.arange(host_batch_size, dtype=np.int64)
        blocks.append(dict(examples_at(indices), example_index=indices))
      arrays = {key: np.concatenate([block[key] for block in blocks]) for key in blocks[0]}
      yield masked_dataset(tf.data.Dataset.from_tensor_slices(arrays), mask_fn, host_batch_size)
      step = stop

  return PretrainingBatches(
    chunk_datasets(),
    start_position=start_position,
    global_batch_size=global_batch_size,
    num_batches=num_batches,
  )


def make_mask_fn(masking_seed, masking_config, max_seq_length):
  """The per-example masking step as a `tf.function`, traced once and reused by every dataset.

  Args:
    masking_seed: int63 seed of this stream's masks.
    masking_config: a ``masking.MaskingConfig``.
    max_seq_length: L.

  Returns:
    A function from an unmasked example dict (with int64 ``example_index``) to a masked one.
  """
  length = tf.TensorSpec([max_seq_length], tf.int32)
  signature = {
    "input_ids": length,
    "token_type_ids": length,
    "input_mask": length,
    "next_sentence_labels": tf.TensorSpec([], tf.int32),
    "example_index": tf.TensorSpec([], tf.int64),
  }

  # Plain TensorFlow ops, no Python control flow on tensors: AutoGraph would only rewrite the
  # masking code's source, about 3 s of every process's first pipeline.
  @tf.function(input_signature=[signature], autograph=False)
  def mask(example):
    # The mask depends only on (stream seed, global example index): same on any host or
    # after any restart.
    example = dict(example)
    seed = tf.stack([tf.constant(masking_seed, tf.int64), example.pop("example_index")])
    return {**example, **masking.mask_example(example["input_ids"], seed, masking_config)}

  return mask


def masked_dataset(examples_dataset, mask_fn, host_batch_size):
  """tf.data: unmasked examples -> per-example stateless masking -> batches.

  Args:
    examples_dataset: a dataset of dicts of ``_UNMASKED_KEYS`` arrays and int64
      ``example_index``, one example each, in order.
    mask_fn: from `make_mask_fn`.
    host_batch_size: b.

  Returns:
    A ``tf.data.Dataset`` of batch dicts.
  """
  dataset = examples_dataset.map(mask_fn, num_parallel_calls=PARALLEL_CALLS, deterministic=True)
  dataset = dataset.batch(host_batch_size, drop_remainder=True)
  return dataset.prefetch(_PREFETCH_BATCHES).with_options(_fixed_options())


def _fixed_options():
  """Fixed parallelism instead of AUTOTUNE.

  AUTOTUNE's model thread sleeps up to 60 s between optimisation rounds and the iterator's
  destructor waits for it: a long run then hangs for a minute at exit. Masking is cheap and
  evenly sized, so a fixed number of parallel calls is as fast.
  """
  options = tf.data.Options()
  options.autotune.enabled = False
  options.deterministic = True
  return options
