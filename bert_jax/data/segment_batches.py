"""The causal-LM input pipeline (``data.objective='clm'``): corpus -> host-local segment batches.

The corpus is read and tokenised as for masked pretraining (text files or TFDS text, the same
held-out documents), then laid out as Transformer-XL streams (`segment_stream.py`): global batch
row r reads its own contiguous stream, one ``max_seq_length``-token segment per step.

What the trainer relies on:

* **Position** (``SegmentBatches.position``) counts global rows consumed, as the masked pipeline
  counts examples: after ``s`` steps it is ``s * global_batch_size``, and starting from it gives
  segment ``s`` of every row next. Batches are pure functions of (segment, process), so a
  resumed run reads exactly the segments an uninterrupted one would.
* **Host sharding:** process p of n builds only rows ``[p*b, (p+1)*b)`` (``b = B / n``).
* Splits: ``train`` is endless (the streams wrap around); ``eval`` is every segment of the
  held-out streams once (or the first ``num_eval_examples / B`` of them), read from the start,
  so eval carries its own memory through the held-out text.
"""

from absl import logging

from bert_jax.data import batch_requests, corpus_source, tokenization
from bert_jax.data.segment_stream import SegmentStream
from bert_jax.errors import UserInputError

SPLITS = ("train", "eval")


class SegmentBatches:
  """Iterator over host-local batches of consecutive segments that tracks the data position."""

  def __init__(self, stream: SegmentStream, first_segment, num_batches, process_index, count):
    self._stream = stream
    self._segment = first_segment
    self._end = None if num_batches is None else first_segment + num_batches
    self._process = (process_index, count)

  @property
  def position(self) -> int:
    """Global rows consumed: the value to checkpoint and pass back as ``start_position``."""
    return self._segment * self._stream.global_rows

  def __iter__(self):
    return self

  def __next__(self):
    if self._end is not None and self._segment >= self._end:
      raise StopIteration
    batch = self._stream.batch(self._segment, *self._process)
    self._segment += 1
    return batch


class SegmentData:
  """Reads and tokenises the corpus once, then makes segment iterators for either split."""

  def __init__(self, config, *, model_vocab_size=None, global_batch_size=None):
    """Loads the vocab and the corpus and holds out the eval documents.

    Args:
      config: a `PretrainingDataConfig` with ``objective='clm'``.
      model_vocab_size: the model's ``vocab_size``; when given it must equal the vocab's.
      global_batch_size: when given, both splits' streams are laid out for it now, so a corpus
        too short for them is refused before the run writes anything.

    Raises:
      UserInputError: TFRecords (they hold masked pairs, not text), a vocab size mismatch, an
        unreadable corpus, or one that gives a row not even one segment.
    """
    if config.tfrecord_pattern:
      raise UserInputError(
        "data.objective='clm' reads text (data.corpus_paths or data.tfds_name), not the masked "
        "pairs of data.tfrecord_pattern; unset data.tfrecord_pattern"
      )
    self.config = config
    vocab_path = config.resolved_vocab_path()
    self.tokenizer = tokenization.load_model_tokenizer(
      vocab_path, lowercase=config.lowercase, model_vocab_size=model_vocab_size
    )
    splits = corpus_source.read_splits(config, self.tokenizer)
    self._corpora = {"train": splits.train, "eval": splits.eval}
    self._streams = {}
    self.num_train_examples = 0  # Streams have no epochs of examples (num_train_epochs is 0).
    if global_batch_size is not None:
      for split, corpus in self._corpora.items():
        if corpus is not None:
          self.stream(split, global_batch_size)
    logging.info(
      "causal LM corpus: %d documents (%d held out), %d tokens",
      splits.corpus.num_documents,
      splits.num_held_out,
      splits.corpus.num_tokens,
    )

  def stream(self, split: str, global_batch_size: int) -> SegmentStream:
    """The split's streams for ``global_batch_size`` rows (built once per split and size)."""
    key = (split, global_batch_size)
    if key not in self._streams:
      corpus = self._corpora[split]
      if corpus is None:
        raise UserInputError(
          "the eval split is empty because data.eval_fraction is 0; set it to e.g. 0.05 to "
          "hold out documents for evaluation"
        )
      self._streams[key] = SegmentStream.from_documents(
        corpus, global_batch_size, self.config.max_seq_length
      )
    return self._streams[key]

  def batches(
    self, *, split, seed, global_batch_size, process_index=0, process_count=1, start_position=0
  ):
    """This process's share of the global batches, from ``start_position`` on.

    Args:
      split: "train" (endless) or "eval" (finite, always from the start of the streams).
      seed: unused: the streams are in corpus order (Transformer-XL does not shuffle them).
      global_batch_size: B, rows (streams) over all processes.
      process_index: this process, in [0, process_count).
      process_count: number of processes; must divide B.
      start_position: global rows already consumed (a saved ``position``); a multiple of B.

    Returns:
      A `SegmentBatches` of dicts of numpy arrays [B / process_count, max_seq_length]:
      ``input_ids``, ``document_ids``, ``labels``, ``label_weights``.
    """
    del seed
    batch_requests.check_batch_request(
      split,
      SPLITS,
      global_batch_size,
      process_index,
      process_count,
      start_position,
      whole_batches=True,
    )
    stream = self.stream(split, global_batch_size)
    num_batches = None
    if split == "eval":
      num_batches = stream.segments_per_epoch
      if self.config.num_eval_examples is not None:
        num_batches = min(num_batches, max(1, self.config.num_eval_examples // global_batch_size))
    first_segment = start_position // global_batch_size
    return SegmentBatches(stream, first_segment, num_batches, process_index, process_count)
