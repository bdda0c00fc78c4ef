"""Random access to a run's pretraining examples: global example index -> unmasked arrays.

The train stream is an endless sequence of epochs. Epoch ``e`` pairs up the training documents
anew with a generator seeded by ``(seed, e)`` and shuffles the pairs, so example ``g`` is slot
``g % epoch_size`` of epoch ``g // epoch_size``, computable without replaying anything before it.
Pairing is random, so epochs differ slightly in how many pairs they yield; every epoch is cut or
topped up (with a random sample of its own pairs) to the size of epoch 0, which keeps the index
arithmetic exact.

The eval set is built once from the held-out documents with a fixed seed (independent of the
run's seed, so runs with different seeds are evaluated on identical examples).
"""

import collections
import threading

import numpy as np
from absl import logging

from bert_jax.data import sentence_pairs

TRAIN_STREAM = 1
EVAL_STREAM = 2
# Fixed seed of the eval pairs and of their masking.
EVAL_SEED = 20181011
# Epochs kept in memory: the current one and the next, which a batch may straddle.
_CACHED_EPOCHS = 2


def stream_seed(seed, stream):
  """A non-negative int63 derived from (seed, stream), e.g. for stateless TF masking seeds."""
  words = np.random.SeedSequence([seed % 2**64, stream]).generate_state(2, dtype=np.uint32)
  return (int(words[0]) << 31) | (int(words[1]) >> 1)


class TrainExamples:
  """The endless, epoch-shuffled train stream of sentence pairs (unmasked)."""

  def __init__(
    self,
    corpus,
    *,
    seed,
    max_seq_length,
    short_seq_prob,
    single_sentence_next,
    special_ids,
    objective="nsp",
  ):
    """Pairs epoch 0 to fix the epoch size.

    Args:
      corpus: the training :class:`TokenizedDocuments`.
      seed: the run's seed.
      max_seq_length: L.
      short_seq_prob: see :func:`sentence_pairs.sample_pair_spans`.
      single_sentence_next: see :func:`sentence_pairs.sample_pair_spans`.
      special_ids: a ``SpecialTokenIds``.
      objective: "nsp", "sop" or "none" (see :func:`sentence_pairs.sample_pair_spans`).
    """
    self._corpus = corpus
    self._objective = objective
    self._seed = seed % 2**64
    self._max_seq_length = max_seq_length
    self._short_seq_prob = short_seq_prob
    self._single_sentence_next = single_sentence_next
    self._special_ids = special_ids
    self._lock = threading.Lock()
    self._epochs = collections.OrderedDict()
    self._epoch_size = None
    self._epoch_size = len(self.epoch(0))
    self.masking_seed = stream_seed(seed, TRAIN_STREAM)
    logging.info(
      "train epoch: %d sentence pairs from %d documents", self._epoch_size, corpus.num_documents
    )

  @property
  def epoch_size(self):
    return self._epoch_size

  num_examples = None  # Endless.

  def _build_epoch(self, epoch):
    rng = np.random.default_rng([self._seed, TRAIN_STREAM, epoch])
    spans = sentence_pairs.sample_pair_spans(
      self._corpus,
      max_seq_length=self._max_seq_length,
      short_seq_prob=self._short_seq_prob,
      rng=rng,
      single_sentence_next=self._single_sentence_next,
      objective=self._objective,
    )
    order = rng.permutation(len(spans))
    size = self._epoch_size if self._epoch_size is not None else len(spans)
    if len(order) > size:
      order = order[:size]
    elif len(order) < size:
      shortfall = size - len(order)
      extra = rng.choice(order, size=shortfall, replace=shortfall > len(order))
      order = np.concatenate([order, extra])
    return spans.take(order)

  def epoch(self, epoch):
    """The shuffled :class:`PairSpans` of one epoch (cached; thread-safe).

    tf.data loads blocks in parallel; the lock makes threads that reach a new epoch together
    wait for one build instead of each pairing the corpus.
    """
    with self._lock:
      if epoch not in self._epochs:
        self._epochs[epoch] = self._build_epoch(epoch)
        while len(self._epochs) > _CACHED_EPOCHS:
          self._epochs.popitem(last=False)
      self._epochs.move_to_end(epoch)
      return self._epochs[epoch]

  def examples(self, indices):
    """Assembled, unmasked examples at global ``indices`` (int64 array), as numpy arrays."""
    indices = np.asarray(indices, dtype=np.int64)
    epochs = indices // self._epoch_size
    slots = indices % self._epoch_size
    # A block of indices may straddle two epochs: gather per epoch, then restore the order.
    order = np.argsort(epochs, kind="stable")
    parts = [
      self.epoch(int(epoch)).take(slots[order][epochs[order] == epoch])
      for epoch in np.unique(epochs)
    ]
    spans = sentence_pairs.PairSpans.concatenate(parts).take(np.argsort(order, kind="stable"))
    return sentence_pairs.assemble_pairs(
      self._corpus, spans, max_seq_length=self._max_seq_length, special_ids=self._special_ids
    )


class EvalExamples:
  """A fixed, finite set of sentence pairs from the held-out documents (unmasked)."""

  def __init__(
    self,
    corpus,
    *,
    max_seq_length,
    short_seq_prob,
    single_sentence_next,
    special_ids,
    num_examples=None,
    objective="nsp",
  ):
    """Pairs the held-out documents once with the fixed eval seed.

    Args:
      corpus: the held-out :class:`TokenizedDocuments`.
      max_seq_length: L.
      short_seq_prob: see :func:`sentence_pairs.sample_pair_spans`.
      single_sentence_next: see :func:`sentence_pairs.sample_pair_spans`.
      special_ids: a ``SpecialTokenIds``.
      num_examples: at most this many pairs are kept (a random sample); None keeps them all.
      objective: "nsp", "sop" or "none" (see :func:`sentence_pairs.sample_pair_spans`).
    """
    rng = np.random.default_rng([EVAL_SEED, EVAL_STREAM])
    spans = sentence_pairs.sample_pair_spans(
      corpus,
      max_seq_length=max_seq_length,
      short_seq_prob=short_seq_prob,
      rng=rng,
      single_sentence_next=single_sentence_next,
      objective=objective,
    )
    if num_examples is not None and num_examples > len(spans):
      # A cap, not a demand: one config can then serve corpora of any size.
      logging.warning(
        "data.num_eval_examples is %d but the %d held-out documents give only %d sentence "
        "pairs; evaluating on all %d (raise data.eval_fraction for more)",
        num_examples,
        corpus.num_documents,
        len(spans),
        len(spans),
      )
    order = rng.permutation(len(spans))[:num_examples]
    self._spans = spans.take(order)
    self._corpus = corpus
    self._max_seq_length = max_seq_length
    self._special_ids = special_ids
    self.masking_seed = stream_seed(EVAL_SEED, EVAL_STREAM)

  @property
  def num_examples(self):
    return len(self._spans)

  def examples(self, indices):
    """Assembled, unmasked examples at ``indices`` (< num_examples), as numpy arrays."""
    return sentence_pairs.assemble_pairs(
      self._corpus,
      self._spans.take(np.asarray(indices, dtype=np.int64)),
      max_seq_length=self._max_seq_length,
      special_ids=self._special_ids,
    )
