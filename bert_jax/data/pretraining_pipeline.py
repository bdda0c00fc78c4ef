"""The pretraining input pipeline: text corpus -> host-local batches of masked sentence pairs.

What the trainer relies on:

* **Deterministic** for a seed; the corpus is read and tokenised once per process.
* **Data position** (``PretrainingBatches.position``): global examples consumed so far. Global
  batch ``k`` after a start position ``s`` holds examples ``[s + k*B, s + (k+1)*B)``; starting a
  new pipeline at a saved position gives exactly the batches an uninterrupted run would have
  given from there, because any example is computed from its index (no replay): its epoch's
  pairing is seeded by ``(seed, epoch)`` and its mask by ``(seed, example index)``.
* **Host sharding:** process ``p`` of ``n`` yields examples ``[p*b, (p+1)*b)`` of every global
  batch (``b = B / n``), so hosts are disjoint, cover the batch, and their concatenation in
  process order is the one-process batch.
* **tf.data does the masking** in the graph (parallel ``map``, ``prefetch``); sentence pairing
  is numpy.
* Splits: ``train`` is endless (epochs re-paired and re-shuffled); ``eval`` is a fixed finite
  set of whole global batches from held-out documents, masked with a fixed seed.

Batches are dicts of numpy arrays: ``input_ids``, ``token_type_ids``, ``input_mask`` int32
[b, L]; ``masked_lm_positions``, ``masked_lm_ids`` int32 [b, P]; ``masked_lm_weights`` float32
[b, P]; ``next_sentence_labels`` int32 [b] (0 = actual next, 1 = random).
"""

from absl import logging

from bert_jax import environment
from bert_jax.data import (
  batch_requests,
  corpus_source,
  full_sentences,
  masked_batches,
  masking,
  pretraining_examples,
  record_format,
  record_source,
  tokenization,
)
from bert_jax.errors import UserInputError

tf = environment.import_tensorflow_for_data()

SPLITS = ("train", "eval")


class PretrainingData:
  """Reads and tokenises the corpus once, then makes batch iterators for either split."""

  def __init__(self, config, *, model_vocab_size=None):
    """Loads the vocab and corpus and splits off the held-out documents.

    Args:
      config: a :class:`PretrainingDataConfig`.
      model_vocab_size: the model's ``vocab_size``; when given it must equal the vocab file's
        size.

    Raises:
      FileNotFoundError: the vocab or a corpus file is missing.
      ValueError: bad vocab, empty corpus, too few documents or a vocab size mismatch.
    """
    self.config = config
    vocab_path = config.resolved_vocab_path()
    self.tokenizer = tokenization.load_model_tokenizer(
      vocab_path, lowercase=config.lowercase, model_vocab_size=model_vocab_size
    )
    self.records = None
    self.train_corpus = self.eval_corpus = None
    if config.tfrecord_pattern:
      self.records = record_source.RecordSource(
        tfrecord_pattern=config.tfrecord_pattern,
        eval_tfrecord_pattern=config.eval_tfrecord_pattern,
        max_seq_length=config.max_seq_length,
        objective=config.objective,
        shuffle_buffer_size=config.shuffle_buffer_size,
      )
      logging.info(
        "pretraining records: %d train files (%d sequences), %d eval sequences",
        len(self.records.train_files),
        sum(self.records.train_counts),
        self.records.num_eval_examples,
      )
    else:
      self._read_corpus(config)
    self.masking_config = masking.masking_config_for(config, self.tokenizer)
    self._pairing = dict(
      max_seq_length=config.max_seq_length,
      short_seq_prob=config.short_seq_prob,
      single_sentence_next=config.single_sentence_next,
      special_ids=self.tokenizer.special_ids,
      objective=config.objective,
    )
    self._full_sentences = dict(
      max_seq_length=config.max_seq_length, special_ids=self.tokenizer.special_ids
    )
    self._eval_examples = None

  def _read_corpus(self, config):
    """Reads, tokenises and splits the text corpus (the text source, or TFDS text)."""
    splits = corpus_source.read_splits(config, self.tokenizer)
    self.train_corpus, self.eval_corpus = splits.train, splits.eval
    logging.info(
      "pretraining corpus: %d documents (%d held out), %d sentences, %d tokens",
      splits.corpus.num_documents,
      splits.num_held_out,
      splits.corpus.num_sentences,
      splits.corpus.num_tokens,
    )

  def train_examples(self, seed):
    """The unmasked train stream for ``seed`` (a :class:`pretraining_examples.TrainExamples`,
    or `full_sentences.FullSentenceExamples` with ``data.packing='full_sentences'``)."""
    if self.config.packing == "full_sentences":
      return full_sentences.FullSentenceExamples(
        self.train_corpus, seed=seed, **self._full_sentences
      )
    return pretraining_examples.TrainExamples(self.train_corpus, seed=seed, **self._pairing)

  def eval_examples(self):
    """The fixed unmasked eval set (an :class:`pretraining_examples.EvalExamples`)."""
    if self.eval_corpus is None:
      raise UserInputError(
        "the eval split is empty because data.eval_fraction is 0; set it to e.g. 0.05 to "
        "hold out documents for evaluation"
      )
    if self._eval_examples is None and self.config.packing == "full_sentences":
      self._eval_examples = full_sentences.FullSentenceExamples(
        self.eval_corpus, num_examples=self.config.num_eval_examples, **self._full_sentences
      )
    if self._eval_examples is None:
      self._eval_examples = pretraining_examples.EvalExamples(
        self.eval_corpus, num_examples=self.config.num_eval_examples, **self._pairing
      )
    return self._eval_examples

  def batches(
    self, *, split, seed, global_batch_size, process_index=0, process_count=1, start_position=0
  ):
    """Makes an iterator over this process's share of the global batches.

    Args:
      split: "train" (endless) or "eval" (finite; ``seed`` is ignored, eval is fixed).
      seed: the run's seed (pairing, shuffling and masking of the train stream).
      global_batch_size: B, examples per step over all processes.
      process_index: this process, in [0, process_count).
      process_count: number of processes; must divide B.
      start_position: global examples already consumed (a saved ``position``).

    Returns:
      A :class:`PretrainingBatches`.

    Raises:
      ValueError: bad split, batch size, process index or position.
    """
    batch_requests.check_batch_request(
      split, SPLITS, global_batch_size, process_index, process_count, start_position
    )
    if self.records is not None:
      return self._record_batches(
        split, seed, global_batch_size, process_index, process_count, start_position
      )
    if split == "train":
      examples = self.train_examples(seed)
      end = None
    else:
      examples = self.eval_examples()
      end = examples.num_examples - examples.num_examples % global_batch_size
      if end == 0:
        raise UserInputError(
          f"the eval split has {examples.num_examples} examples, fewer than one global batch "
          f"of {global_batch_size}; raise data.eval_fraction or data.num_eval_examples, or "
          "lower the batch size"
        )
    num_batches = None if end is None else max(0, (end - start_position) // global_batch_size)
    mask_fn = masked_batches.make_mask_fn(
      examples.masking_seed, self.masking_config, self.config.max_seq_length
    )

    def examples_at(indices):
      block = examples.examples(indices)
      return {key: block[key] for key in _UNMASKED_KEYS}

    return masked_batches.batches_by_index(
      examples_at,
      mask_fn,
      start_position=start_position,
      process_index=process_index,
      process_count=process_count,
      global_batch_size=global_batch_size,
      num_batches=num_batches,
    )

  def _record_batches(
    self, split, seed, global_batch_size, process_index, process_count, start_position
  ):
    """The TFRecord source's batches (see ``record_source`` for order and resume)."""
    host_batch_size = global_batch_size // process_count
    if split == "train":
      records = self.records.train_records(
        seed=pretraining_examples.stream_seed(seed, _RECORD_ORDER_STREAM),
        global_batch_size=global_batch_size,
        process_index=process_index,
        process_count=process_count,
        start_position=start_position,
      )
      num_batches = None
      masking_seed = pretraining_examples.stream_seed(seed, _RECORD_MASK_STREAM)
    else:
      records, num_batches = self.records.eval_records(
        global_batch_size=global_batch_size,
        process_index=process_index,
        process_count=process_count,
      )
      records = records.skip(start_position // process_count)
      num_batches = max(0, num_batches - start_position // global_batch_size)
      masking_seed = pretraining_examples.stream_seed(
        pretraining_examples.EVAL_SEED, _RECORD_MASK_STREAM
      )
    max_seq_length = self.config.max_seq_length

    def parse(serialized_B, index_B):
      return {**record_format.parse_batch(serialized_B, max_seq_length), "example_index": index_B}

    blocks = records.batch(host_batch_size, drop_remainder=True).map(
      parse, num_parallel_calls=masked_batches.PARALLEL_CALLS, deterministic=True
    )
    mask_fn = masked_batches.make_mask_fn(
      masking_seed, self.masking_config, self.config.max_seq_length
    )
    dataset = masked_batches.masked_dataset(blocks.unbatch(), mask_fn, host_batch_size)
    return masked_batches.PretrainingBatches(
      [dataset],
      start_position=start_position,
      global_batch_size=global_batch_size,
      num_batches=num_batches,
    )


_UNMASKED_KEYS = ("input_ids", "token_type_ids", "input_mask", "next_sentence_labels")
# Streams of stream_seed for the TFRecord source: file/record order and masks.
_RECORD_ORDER_STREAM = 3
_RECORD_MASK_STREAM = 4


def pretraining_batches(
  data_config,
  *,
  seed,
  global_batch_size,
  process_index=0,
  process_count=1,
  split="train",
  start_position=0,
  model_vocab_size=None,
):
  """One-shot form: builds a :class:`PretrainingData` and returns one batch iterator.

  Use :class:`PretrainingData` directly to build train and eval iterators from one tokenised
  corpus.
  """
  data = PretrainingData(data_config, model_vocab_size=model_vocab_size)
  return data.batches(
    split=split,
    seed=seed,
    global_batch_size=global_batch_size,
    process_index=process_index,
    process_count=process_count,
    start_position=start_position,
  )
