"""Pre-tokenised TFRecord shards as a source of pretraining examples, sharded per host.

How exact resume works (and why this way): each process reads whole files, ``files[p::n]``, so
processes are disjoint and together cover the data. A process's stream is a fixed function of
(seed, process, epoch): epoch ``e`` reads its files in a stateless-shuffled order through a
deterministic parallel interleave, then a seeded shuffle buffer. The trainer's data position
``s`` (global examples consumed, whole global batches) means this process has consumed ``s / n``
examples of its own stream; the record counts in the metadata give the epoch and the offset in
it, whole epochs are skipped without reading, and only the offset within the current epoch is
replayed as raw records (no parsing or masking) to rebuild the shuffle buffer exactly. Saving a
tf.data iterator checkpoint instead would tie checkpoints to TensorFlow internals and to the
shuffle buffer's memory; an integer position keeps the checkpoint tiny and the same for both
sources. Resume is exact for the same process count, which a pod restart keeps.

Masking seeds use the example's global index (process ``p``'s ``j``-th example is slot
``p*b + j % b`` of global batch ``j // b``), like the text source.
"""

from bert_jax import environment
from bert_jax.data import record_format
from bert_jax.errors import UserInputError

tf = environment.import_tensorflow_for_data()

# Files read at once per process; more hides file latency on network storage.
_INTERLEAVE_FILES = 4


class RecordSource:
  """The train (and optionally eval) TFRecord files of a run, with their record counts."""

  def __init__(
    self, *, tfrecord_pattern, eval_tfrecord_pattern, max_seq_length, objective, shuffle_buffer_size
  ):
    """Finds the files and checks them against the config.

    Args:
      tfrecord_pattern: glob(s) of the train shards.
      eval_tfrecord_pattern: glob(s) of the eval shards; empty for no eval split.
      max_seq_length: L; must match the records.
      objective: the sentence-level objective; must match the records.
      shuffle_buffer_size: records in each process's shuffle buffer.

    Raises:
      FileNotFoundError: a pattern matches nothing.
      UserInputError: the records do not match the config, or are corrupt or empty.
    """
    self.max_seq_length = max_seq_length
    self._shuffle_buffer_size = shuffle_buffer_size
    self.train_files = record_format.expand_record_pattern(tfrecord_pattern, "tfrecord_pattern")
    self.train_counts = record_format.load_shard_info(
      self.train_files, key="tfrecord_pattern", max_seq_length=max_seq_length, objective=objective
    )
    if not sum(self.train_counts):
      raise UserInputError(
        f"the files of data.tfrecord_pattern={tfrecord_pattern!r} hold no records; "
        "re-create them from non-empty text"
      )
    self.eval_files, self.eval_counts = [], []
    if eval_tfrecord_pattern:
      self.eval_files = record_format.expand_record_pattern(
        eval_tfrecord_pattern, "eval_tfrecord_pattern"
      )
      self.eval_counts = record_format.load_shard_info(
        self.eval_files,
        key="eval_tfrecord_pattern",
        max_seq_length=max_seq_length,
        objective=objective,
      )

  @property
  def num_eval_examples(self):
    return sum(self.eval_counts)

  def host_files(self, process_index, process_count):
    """This process's files and their record counts."""
    if len(self.train_files) < process_count:
      raise UserInputError(
        f"data.tfrecord_pattern matches {len(self.train_files)} files but there are "
        f"{process_count} processes, and each reads whole files; write at least "
        f"{process_count} shards (create_pretraining_data --num_shards)"
      )
    return (
      self.train_files[process_index::process_count],
      self.train_counts[process_index::process_count],
    )

  def train_records(self, *, seed, global_batch_size, process_index, process_count, start_position):
    """This process's endless stream of ``(serialized record, global example index)``.

    Args:
      seed: int63 seed of the file order and shuffling.
      global_batch_size: B.
      process_index: p.
      process_count: n (divides B).
      start_position: global examples consumed; a multiple of B.

    Returns:
      A ``tf.data.Dataset`` of (string, int64) pairs.
    """
    if start_position % global_batch_size:
      raise UserInputError(
        f"start_position {start_position} is not a whole number of global batches of "
        f"{global_batch_size}; resume with the batch size the position was saved with"
      )
    files, counts = self.host_files(process_index, process_count)
    epoch_size = sum(counts)
    if not epoch_size:
      raise UserInputError(
        f"process {process_index} of {process_count} got only empty files of "
        "data.tfrecord_pattern; write more, equally sized shards"
      )
    host_batch_size = global_batch_size // process_count
    consumed = start_position // process_count
    first_epoch, offset = divmod(consumed, epoch_size)
    files_F = tf.constant(files)
    buffer_size = self._shuffle_buffer_size

    def epoch_records(epoch):
      epoch = tf.cast(epoch, tf.int64)
      order_F = tf.random.experimental.stateless_shuffle(
        files_F, seed=tf.stack([tf.constant(seed, tf.int64), epoch])
      )
      records = tf.data.Dataset.from_tensor_slices(order_F).interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(_INTERLEAVE_FILES, len(files)),
        block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
      )
      if buffer_size > 1:
        records = records.shuffle(
          buffer_size, seed=seed % 2**31 + epoch, reshuffle_each_iteration=False
        )
      return records

    records = (
      epoch_records(first_epoch)
      .skip(offset)
      .concatenate(tf.data.Dataset.range(first_epoch + 1, 2**62).flat_map(epoch_records))
    )
    local = tf.data.Dataset.counter(start=consumed)
    indices = local.map(
      lambda j: (
        (j // host_batch_size) * global_batch_size
        + process_index * host_batch_size
        + j % host_batch_size
      )
    )
    return tf.data.Dataset.zip((records, indices))

  def eval_records(self, *, global_batch_size, process_index, process_count):
    """This process's share of the fixed eval records, whole global batches only.

    Returns:
      ``(dataset of (string, int64 global index), number of batches)``.

    Raises:
      UserInputError: there are no eval files or fewer records than one global batch.
    """
    total = self.num_eval_examples
    if not self.eval_files:
      raise UserInputError(
        "the eval split is empty: set data.eval_tfrecord_pattern to the eval-*.tfrecord files "
        "that create_pretraining_data writes (--eval_fraction)"
      )
    num_batches = total // global_batch_size
    if not num_batches:
      raise UserInputError(
        f"the eval records hold {total} examples, fewer than one global batch of "
        f"{global_batch_size}; raise create_pretraining_data --eval_fraction or lower the "
        "batch size"
      )
    host_batch_size = global_batch_size // process_count
    records = tf.data.TFRecordDataset(self.eval_files).take(num_batches * global_batch_size)
    records = tf.data.Dataset.zip((records, tf.data.Dataset.counter()))
    mine = records.filter(lambda _, g: (g % global_batch_size) // host_batch_size == process_index)
    return mine, num_batches
