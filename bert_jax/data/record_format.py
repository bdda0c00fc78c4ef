"""The on-disk format of pre-tokenised pretraining data: TFRecord shards plus JSON metadata.

Each record is a ``tf.train.Example`` of one unmasked sequence, padded to ``max_seq_length``:
``input_ids``, ``token_type_ids``, ``input_mask`` (document id per token, 0 = padding) as int64
lists of exactly L values, and ``next_sentence_labels`` (one int64). Masking is not stored: the
pipeline masks every time a sequence is read (dynamic masking).

Next to the shards, ``metadata-<process>.json`` (one per writing process) records how the
shards were made and how many records each holds; readers use the counts to map a global
example index to a file and record without scanning the data.

Files are read and written through `bert_jax.data.files` and ``tf.io``, so shards and metadata
may live on ``gs://``.
"""

import json
import os
import re

from absl import logging

from bert_jax import environment
from bert_jax.data import files as data_files
from bert_jax.errors import UserInputError

tf = environment.import_tensorflow_for_data()

SEQUENCE_KEYS = ("input_ids", "token_type_ids", "input_mask")
LABEL_KEY = "next_sentence_labels"
STYLES = ("pairs", "full_sentences")


def shard_name(split, index, count):
  return f"{split}-{index:05d}-of-{count:05d}.tfrecord"


def serialize(arrays, row):
  """One row of the arrays (int [N, L] sequences, [N] labels) as a serialised Example."""
  feature = {
    key: tf.train.Feature(int64_list=tf.train.Int64List(value=arrays[key][row].tolist()))
    for key in SEQUENCE_KEYS
  }
  feature[LABEL_KEY] = tf.train.Feature(
    int64_list=tf.train.Int64List(value=[int(arrays[LABEL_KEY][row])])
  )
  # Map fields serialise in hash order unless asked not to; shards must be byte-identical.
  example = tf.train.Example(features=tf.train.Features(feature=feature))
  return example.SerializeToString(deterministic=True)


def write_records(path, arrays):
  """Writes every row of ``arrays`` to the TFRecord file ``path``; returns the row count."""
  num_rows = len(arrays[LABEL_KEY])
  with tf.io.TFRecordWriter(path) as writer:
    for row in range(num_rows):
      writer.write(serialize(arrays, row))
  return num_rows


def parse_batch(serialized_B, max_seq_length):
  """Parses a batch of serialised records into int32 tensors ([B, L] and [B])."""
  spec = {key: tf.io.FixedLenFeature([max_seq_length], tf.int64) for key in SEQUENCE_KEYS}
  spec[LABEL_KEY] = tf.io.FixedLenFeature([1], tf.int64)
  parsed = tf.io.parse_example(serialized_B, spec)
  result = {key: tf.cast(parsed[key], tf.int32) for key in SEQUENCE_KEYS}
  result[LABEL_KEY] = tf.cast(parsed[LABEL_KEY][:, 0], tf.int32)
  return result


def write_metadata(output_dir, process_index, metadata):
  path = os.path.join(output_dir, f"metadata-{process_index:05d}.json")
  data_files.write_text(path, json.dumps(metadata, indent=1, sort_keys=True))
  return path


def expand_record_pattern(pattern, key):
  """Sorted files matching ``pattern`` (comma-separated patterns allowed).

  Raises:
    FileNotFoundError: nothing matches.
  """
  matches = sorted({f for part in pattern.split(",") if part for f in data_files.glob(part)})
  if not matches:
    raise FileNotFoundError(
      f"data.{key}={pattern!r} matches no files; point it at TFRecords written by "
      "python -m bert_jax.tools.create_pretraining_data (e.g. /out/train-*.tfrecord)"
    )
  return matches


def count_records(path):
  """Counts the records of one file by reading it; corrupt files raise UserInputError."""
  try:
    return int(tf.data.TFRecordDataset(path).reduce(tf.constant(0, tf.int64), lambda n, _: n + 1))
  except tf.errors.DataLossError as e:
    raise corrupt_record_error(e, path) from None


def corrupt_record_error(error, path=None):
  where = path or "one of the TFRecord files"
  detail = str(getattr(error, "message", error)).splitlines()[0]
  # TensorFlow wraps the reader's message in function-node and op names; keep the message.
  detail = re.sub(r"\{\{.*?\}\}\s*|\s*\[Op:.*$", "", detail)
  return UserInputError(
    f"{where} is corrupt or truncated ({detail}); re-create it with "
    "python -m bert_jax.tools.create_pretraining_data"
  )


def load_shard_info(files, *, key, max_seq_length, objective):
  """Record counts of ``files`` and checks that they were made for this config.

  Counts and settings come from the ``metadata-*.json`` files next to the shards; a file that
  no metadata lists is counted by reading it (logged).

  Args:
    files: sorted TFRecord paths.
    key: the config key that named them, for messages.
    max_seq_length: the config's L; must equal the records'.
    objective: the config's sentence-level objective; must equal the records'.

  Returns:
    A list of record counts, one per file.

  Raises:
    UserInputError: the records were made with another length or objective, or are corrupt.
  """
  listed = {}
  for directory in sorted({os.path.dirname(data_files.absolute_path(f)) for f in files}):
    for metadata_path in data_files.glob(os.path.join(directory, "metadata-*.json")):
      metadata = json.loads(data_files.read_text(metadata_path))
      if metadata["max_seq_length"] != max_seq_length:
        raise UserInputError(
          f"{metadata_path}: the records of data.{key} hold sequences of length "
          f"{metadata['max_seq_length']} but data.max_seq_length is {max_seq_length}; set "
          f"data.max_seq_length={metadata['max_seq_length']} or re-create the records"
        )
      if metadata["objective"] != objective:
        raise UserInputError(
          f"{metadata_path}: the records of data.{key} were made for objective "
          f"{metadata['objective']!r} (style {metadata['style']!r}) but data.objective is "
          f"{objective!r}; set data.objective={metadata['objective']} or re-create them"
        )
      for name, count in metadata["files"].items():
        listed[os.path.join(directory, name)] = count
  counts = []
  unlisted = 0
  for path in files:
    absolute = data_files.absolute_path(path)
    if absolute in listed:
      counts.append(listed[absolute])
    else:
      unlisted += 1
      counts.append(count_records(path))
  if unlisted:
    logging.warning(
      "%d of %d files of data.%s have no metadata-*.json entry; counted them by reading",
      unlisted,
      len(files),
      key,
    )
  return counts
