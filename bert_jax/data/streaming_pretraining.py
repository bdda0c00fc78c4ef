"""Streams text files into pretraining rows in bounded memory, one window of documents at a time.

Documents are read lazily, gathered into windows of ``window_documents`` documents, and each
window is tokenised, split into train and held-out documents, paired (or packed), shuffled and
appended to the shard writers before the next window is read. Memory is bounded by the window,
not by the file size.

Algorithm differences from the in-memory version (which sees a whole process's files at once):

* The random "next sentence" of NSP, the eval hold-out and the shuffle of rows are drawn within a
  window, not the whole corpus.
* Each window's shuffled rows are split evenly over the process's train shards, so every shard
  holds a slice of every window (in window order); training interleaves shards and shuffles.
* Window ``w`` uses the generator ``default_rng([seed, process_index])`` for ``w == 0`` and
  ``default_rng([seed, process_index, w])`` after, so a corpus that fits in one window gives
  byte-identical output to the in-memory version, and any corpus gives output that depends only
  on inputs, flags and seed.
* A last window smaller than half a window is merged into the one before, so no window is too
  small to pair (at most 1.5 windows of documents are held).
"""

import os
import time

import numpy as np
import tensorflow as tf
from absl import logging

from bert_jax.data import files as data_files
from bert_jax.data import record_format, text_corpus, tokenized_corpus
from bert_jax.errors import UserInputError

# Lines after which a file that is mostly not UTF-8 is refused, before it yields a window.
_EARLY_TEXT_CHECK_LINES = 1024


def file_size(path):
  """Bytes of ``path`` (local or gs://), for the progress ETA."""
  return tf.io.gfile.stat(path).length


class _ByteCounter:
  """Counts raw bytes and words read, shared between the reader and the progress line."""

  def __init__(self):
    self.bytes = 0
    self.words = 0  # Whitespace-separated, as `wc -w` counts them.


def stream_documents(paths, counter, split_sentences=None):
  """Yields ``(document, num_undecodable_lines)`` from text files, one document at a time.

  Args:
    paths: BERT-format text files (one sentence or paragraph per line, blank lines between
      documents).
    counter: a ``_ByteCounter`` advanced by the raw bytes and the words read.
    split_sentences: for the paragraphs format, ``str -> list[str]``; None keeps lines as they
      are.

  Yields:
    Lists of sentence strings; the int is lines skipped as non-UTF-8 since the last document.
  """
  for path in paths:
    if not data_files.is_file(path):
      raise FileNotFoundError(f"corpus file {path} does not exist")
    any_text = False
    current, bad = [], 0
    file_bad = file_text = 0
    with data_files.open_binary(path) as f:
      for number, raw_line in enumerate(f, 1):
        counter.bytes += len(raw_line)
        if number == _EARLY_TEXT_CHECK_LINES:  # A binary file is refused before any record.
          text_corpus.check_mostly_text(path, file_bad, file_text)
        try:
          line = raw_line.decode("utf-8").strip()
        except UnicodeDecodeError:
          bad += 1  # Skip only the bad line; counted in the metadata.
          file_bad += 1
          continue
        if line:
          file_text += 1
          counter.words += len(line.split())
          current.extend(split_sentences(line) if split_sentences else [line])
        elif current:
          yield current, bad
          any_text, current, bad = True, [], 0
    text_corpus.check_mostly_text(path, file_bad, file_text)
    if current:
      yield current, bad
      any_text, bad = True, 0
    if bad:
      yield [], bad
    if not any_text:
      raise UserInputError(
        f"corpus file {path} contains no text; it needs one sentence per "
        "line with blank lines between documents"
      )


def windows(documents, window_documents):
  """Groups a document stream into lists of about ``window_documents`` (last one up to 1.5x).

  A window leaves through ``handed`` (appended, then popped as it is yielded), so this
  generator keeps no reference to it: the caller frees its text once it is tokenised.
  """
  pending, current, handed = None, [], []
  half = max(1, window_documents // 2)
  for document in documents:
    current.append(document)
    if pending is not None and len(current) >= half:
      handed.append(pending)
      pending = None
      yield handed.pop()
    if pending is None and len(current) >= window_documents:
      pending, current = current, []
  if pending is not None:
    pending.extend(current)
    current = pending
  if current:
    handed.append(current)
    pending = current = None
    yield handed.pop()


class Progress:
  """Logs documents/s, tokens/s and an ETA (by bytes read of the total) every ``every_s``."""

  def __init__(self, total_bytes, counter, every_s=30.0, log=logging.info):
    self._total, self._counter, self._every, self._log = total_bytes, counter, every_s, log
    self._start = self._last = time.monotonic()
    self.documents = self.tokens = 0

  def update(self, documents, tokens, force=False):
    self.documents += documents
    self.tokens += tokens
    now = time.monotonic()
    if not force and now - self._last < self._every:
      return
    self._last = now
    elapsed = max(now - self._start, 1e-9)
    done = min(self._counter.bytes / max(self._total, 1), 1.0)
    eta = elapsed * (1 - done) / done if done > 0 else float("inf")
    self._log(
      "progress: %d documents (%.0f/s), %d tokens (%.0f/s), %.1f%% of %d bytes, ETA %.0f s",
      self.documents,
      self.documents / elapsed,
      self.tokens,
      self.tokens / elapsed,
      100 * done,
      self._total,
      eta,
    )


# Documents tokenised at a time (their text freed right after).
_TOKENIZE_GROUP_DOCUMENTS = 100
# Rows laid out (and serialised) at a time: a few MB whatever the window holds.
_WRITE_BLOCK_ROWS = 4096


class ArrayRows:
  """Rows already in arrays (``{key: [N, ...]}``), with the ``len`` / ``take`` of `PairRows`."""

  def __init__(self, arrays):
    self._arrays = arrays

  def __len__(self):
    return len(self._arrays[record_format.LABEL_KEY])

  def take(self, indices):
    return {key: value[indices] for key, value in self._arrays.items()}


def _tokenize_window(window, tokenizer):
  """`tokenized_corpus.tokenize_documents` of ``window``, emptying it as it goes: each group
  of documents' text is freed once it is token ids (4 bytes a token, the text several times
  that), so the window's text and its ids are never both held in full."""
  parts = []
  while window:
    group = window[:_TOKENIZE_GROUP_DOCUMENTS]
    del window[:_TOKENIZE_GROUP_DOCUMENTS]
    parts.append(tokenized_corpus.tokenize_documents(group, tokenizer))
    del group
  return tokenized_corpus.TokenizedDocuments.concatenate(parts)


def _write_rows(writer, rows, order):
  """Writes ``rows`` (`ArrayRows` or `sentence_pairs.PairRows`) in ``order``, a block at a time."""
  for start in range(0, len(order), _WRITE_BLOCK_ROWS):
    block = rows.take(order[start : start + _WRITE_BLOCK_ROWS])
    for row in range(len(block[record_format.LABEL_KEY])):
      writer.write(record_format.serialize(block, row))


def write_streaming(
  *,
  paths,
  output_dir,
  process_index,
  process_count,
  num_shards,
  seed,
  eval_fraction,
  tokenizer,
  make_rows,
  window_documents,
  split_sentences=None,
  progress_every_s=30.0,
):
  """Writes one process's train shards and eval file window by window.

  Args:
    paths: this process's input files.
    output_dir: local folder or gs://.
    process_index, process_count, num_shards: sharding as the tool's flags.
    seed: the run's seed.
    eval_fraction: documents held out per window.
    tokenizer: a tokenizer with ``encode_batch``.
    make_rows: ``(corpus, rng) -> (rows, counts dict)``, the pairs or packed rows of one
      split as `ArrayRows` or `sentence_pairs.PairRows`.
    window_documents: documents per window.
    split_sentences: see `stream_documents`.
    progress_every_s: seconds between progress lines.

  Returns:
    ``(written, counts)``: rows per file name and summed counts.
  """
  counter = _ByteCounter()
  progress = Progress(sum(file_size(p) for p in paths), counter, progress_every_s)
  shard_indices = list(range(process_index, num_shards, process_count))
  train_names = [record_format.shard_name("train", s, num_shards) for s in shard_indices]
  eval_name = record_format.shard_name("eval", process_index, process_count)
  written = {name: 0 for name in train_names}
  counts = {
    "non_utf8_lines": 0,
    "documents": 0,
    "tokens": 0,
    "train_sequences": 0,
    "eval_sequences": 0,
  }
  bad_lines = [0]

  def documents():
    for document, bad in stream_documents(paths, counter, split_sentences):
      bad_lines[0] += bad
      if document:
        yield document

  writers = [tf.io.TFRecordWriter(os.path.join(output_dir, n)) for n in train_names]
  eval_writer = None
  try:
    # Not enumerate(): it keeps the last window it yielded alive.
    w = -1
    for window in windows(documents(), window_documents):
      w += 1
      corpus = _tokenize_window(window, tokenizer)
      del window
      train_corpus, eval_corpus = corpus.split(eval_fraction)
      rng = np.random.default_rng([seed, process_index] + ([w] if w else []))
      train, window_counts = make_rows(train_corpus, rng)
      num_train = len(train)
      order = rng.permutation(num_train)
      for writer, name, rows in zip(writers, train_names, np.array_split(order, len(writers))):
        _write_rows(writer, train, rows)
        written[name] += len(rows)
      del train
      if eval_corpus is not None:
        held_out, eval_counts = make_rows(eval_corpus, rng)
        if eval_writer is None:
          eval_writer = tf.io.TFRecordWriter(os.path.join(output_dir, eval_name))
          written[eval_name] = 0
        _write_rows(eval_writer, held_out, rng.permutation(len(held_out)))
        written[eval_name] += len(held_out)
        counts["eval_sequences"] += len(held_out)
        for key, value in eval_counts.items():
          window_counts[key] += value
      for key, value in window_counts.items():
        counts[key] = counts.get(key, 0) + value
      counts["documents"] += corpus.num_documents
      counts["tokens"] += corpus.num_tokens
      counts["train_sequences"] += num_train
      progress.update(corpus.num_documents, corpus.num_tokens)
  finally:
    for writer in writers + ([eval_writer] if eval_writer else []):
      writer.close()
  progress.update(0, 0, force=True)
  counts["non_utf8_lines"] = bad_lines[0]
  counts["words"] = counter.words
  return written, counts
