"""Sentence-pair examples for masked LM + next-sentence prediction, as in the original BERT.

Re-implements the pairing of BERT's ``create_pretraining_data.py`` (its
``create_instances_from_document``) on a :class:`TokenizedDocuments`:

* per document a target length: ``max_seq_length - 3`` tokens, or with probability
  ``short_seq_prob`` a uniform length in [2, max_seq_length - 3], so the model also sees short
  inputs;
* sentences are gathered into a chunk until it reaches the target; segment A is the first
  1..n-1 sentences of the chunk;
* segment B is the rest of the chunk (label 0, "is next") or, half the time, a run of sentences
  from a random other document (label 1, "random"); the unused sentences of the chunk are put
  back and start the next chunk. BERT makes B random whenever the chunk has one sentence, which
  skews labels; by default such a chunk may take the next sentence as B instead (see
  ``single_sentence_next``);
* the pair is truncated to ``max_seq_length - 3`` tokens by removing tokens from the longer
  segment, each from its front or back at random.

Pairs are kept as token-offset spans into the corpus (``PairSpans``), so an epoch of pairs costs
five integers per example, and any example can be assembled into padded arrays on demand.
Everything is deterministic given the ``numpy.random.Generator``.
"""

import dataclasses

import numpy as np
from absl import logging

from bert_jax.errors import UserInputError

# Sentence-level objectives: next-sentence prediction (BERT), sentence-order prediction
# (ALBERT), or none (masked LM only; labels are all 0 and unused).
OBJECTIVES = ("nsp", "sop", "none")

# [CLS] A [SEP] B [SEP] with one token in each segment.
MIN_SEQ_LENGTH = 5
# BERT tries this many times to draw a random document other than the current one.
_RANDOM_DOCUMENT_TRIES = 10
# Rows laid out per vectorised block in `assemble_pairs`.
_BLOCK_ROWS = 4096


@dataclasses.dataclass(frozen=True)
class PairSpans:
  """Sentence pairs as token spans: A is ``token_ids[a_start:a_end]``, B likewise.

  Attributes:
    a_start: [N] int64.
    a_end: [N] int64.
    b_start: [N] int64.
    b_end: [N] int64.
    next_sentence_labels: [N] int32; 0 = B is the actual next segment, 1 = B is random (NSP)
      or A and B are swapped (SOP).
  """

  a_start: np.ndarray
  a_end: np.ndarray
  b_start: np.ndarray
  b_end: np.ndarray
  next_sentence_labels: np.ndarray

  def __len__(self):
    return len(self.next_sentence_labels)

  def _columns(self):
    return [getattr(self, field.name) for field in dataclasses.fields(self)]

  def take(self, indices):
    """The pairs at ``indices`` (any integer index array), as a new ``PairSpans``."""
    return PairSpans(*(column[indices] for column in self._columns()))

  @staticmethod
  def concatenate(parts):
    """All pairs of ``parts`` (a non-empty sequence of ``PairSpans``), in order."""
    return PairSpans(
      *(np.concatenate(columns) for columns in zip(*(part._columns() for part in parts)))
    )


def check_max_seq_length(max_seq_length):
  """Raises ValueError unless a sequence fits [CLS], [SEP], [SEP] and a token per segment."""
  if max_seq_length < MIN_SEQ_LENGTH:
    raise UserInputError(
      f"max_seq_length is {max_seq_length}; a sentence pair needs at least {MIN_SEQ_LENGTH} "
      "positions ([CLS] A [SEP] B [SEP]); use 128 or 512 as BERT does"
    )


class _UniformStream:
  """Uniform floats drawn from a Generator in blocks: per-call Generator overhead dominates."""

  def __init__(self, rng, block_size=8192):
    self._rng = rng
    self._block_size = block_size
    self._block = rng.random(block_size)
    self._next = 0

  def uniform(self):
    if self._next == self._block_size:
      self._block = self._rng.random(self._block_size)
      self._next = 0
    value = self._block[self._next]
    self._next += 1
    return value

  def integer(self, low, high):
    """Uniform integer in [low, high)."""
    return low + int(self.uniform() * (high - low))


def _truncation_counts(length_a, length_b, max_num_tokens):
  """How many tokens BERT's truncation removes from A and from B.

  BERT removes one token at a time from the longer segment (from B on ties) until the pair
  fits; which segment loses a token depends only on the lengths, so the counts have a closed
  form: shorten the longer one to the other's length, then alternate starting with B.
  """
  excess = max(0, length_a + length_b - max_num_tokens)
  gap = abs(length_a - length_b)
  first = min(excess, gap)
  rest = excess - first
  remove_a = (first if length_a > length_b else 0) + rest // 2
  remove_b = (first if length_a <= length_b else 0) + (rest + 1) // 2
  return remove_a, remove_b


def _check_pair_inputs(corpus, max_seq_length, objective):
  """Refuses a too-short length, an unknown objective or a corpus of fewer than two documents."""
  check_max_seq_length(max_seq_length)
  if objective not in OBJECTIVES:
    raise UserInputError(f"objective is {objective!r}; choose one of {OBJECTIVES}")
  if corpus.num_documents < 2:
    raise UserInputError(
      f"next-sentence pairs need at least 2 documents, the corpus has {corpus.num_documents}; "
      "separate documents with blank lines"
    )


def _random_next_segment(stream, tokens, documents, document, target_b):
  """BERT's random B: whole sentences from a random other document, from a random sentence.

  Returns:
    B's first and end token positions.
  """
  num_documents = len(documents) - 1
  for _ in range(_RANDOM_DOCUMENT_TRIES):
    other = stream.integer(0, num_documents)
    if other != document:
      break
  other_first, other_stop = documents[other], documents[other + 1]
  j = stream.integer(other_first, other_stop)
  b_first = tokens[j]
  # Whole sentences until B reaches its target length or the document ends.
  while j < other_stop - 1 and tokens[j + 1] - b_first < target_b:
    j += 1
  return b_first, tokens[j + 1]


def _document_pairs(document, stream, tokens, documents, options, rows):
  """Appends one document's pairs to ``rows``; returns its count of unsplittable sentences.

  Each row is (A start, A end, B start, B end, label, tokens cut from A, tokens cut from B). The
  order of the ``stream`` draws is BERT's, so the pairs are a fixed function of the seed.
  """
  max_num_tokens, short_seq_prob, single_sentence_next, objective = options
  num_unsplittable = 0
  first, stop = documents[document], documents[document + 1]
  target = max_num_tokens
  if stream.uniform() < short_seq_prob:
    target = stream.integer(2, max_num_tokens + 1)
  chunk_first = first
  i = first
  while i < stop:
    if tokens[i + 1] - tokens[chunk_first] < target and i != stop - 1:
      i += 1
      continue
    # The chunk is sentences chunk_first..i; A takes the first `a_sentences` of them.
    chunk_sentences = i - chunk_first + 1
    a_sentences = 1 if chunk_sentences == 1 else stream.integer(1, chunk_sentences)
    a_first, a_last = tokens[chunk_first], tokens[chunk_first + a_sentences]
    extend = chunk_sentences == 1 and (single_sentence_next or objective != "nsp") and i + 1 < stop
    if objective == "nsp" and ((chunk_sentences == 1 and not extend) or stream.uniform() < 0.5):
      label = 1
      target_b = target - (a_last - a_first)
      b_first, b_last = _random_next_segment(stream, tokens, documents, document, target_b)
      # The chunk's sentences after A were not used: the next chunk starts with them.
      i = chunk_first + a_sentences - 1
    elif chunk_sentences == 1 and not extend:
      # SOP / none and a document's lone last sentence: its two halves are the segments;
      # a one-token sentence cannot be split and is dropped (counted).
      if a_last - a_first < 2:
        num_unsplittable += 1
        i += 1
        chunk_first = i
        continue
      label = 0
      b_first, b_last = a_first + stream.integer(1, a_last - a_first), a_last
      a_last = b_first
    else:
      label = 0
      if extend:
        i += 1  # B is the document's next sentence, so the next chunk starts after it.
      b_first, b_last = a_last, tokens[i + 1]
    if objective == "sop" and stream.uniform() < 0.5:
      # ALBERT's negative: the same two consecutive segments in swapped order.
      a_first, a_last, b_first, b_last = b_first, b_last, a_first, a_last
      label = 1
    cut_a, cut_b = _truncation_counts(a_last - a_first, b_last - b_first, max_num_tokens)
    rows.append((a_first, a_last, b_first, b_last, label, cut_a, cut_b))
    i += 1
    chunk_first = i
  return num_unsplittable


def _truncated_spans(rows, rng):
  """The rows' spans after BERT's random truncation, as a :class:`PairSpans`."""
  a_start, a_end, b_start, b_end, labels, remove_a, remove_b = (
    np.array(rows, dtype=np.int64).reshape(-1, 7).T
  )
  # Each removed token comes off the front or the back with probability 1/2, as in BERT.
  front_a = rng.binomial(remove_a, 0.5)
  front_b = rng.binomial(remove_b, 0.5)
  return PairSpans(
    a_start=a_start + front_a,
    a_end=a_end - (remove_a - front_a),
    b_start=b_start + front_b,
    b_end=b_end - (remove_b - front_b),
    next_sentence_labels=labels.astype(np.int32),
  )


def sample_pair_spans(
  corpus, *, max_seq_length, short_seq_prob, rng, single_sentence_next=True, objective="nsp"
):
  """Pairs up every document of ``corpus`` once, in document order (not shuffled).

  Args:
    corpus: a :class:`TokenizedDocuments` with at least two documents.
    max_seq_length: length of the assembled sequences, [CLS] and [SEP]s included.
    short_seq_prob: probability that a document uses a shorter random target length.
    rng: a ``numpy.random.Generator``; the result is a deterministic function of its state.
    single_sentence_next: BERT always gives a chunk of one sentence (a long sentence, a short
      target, a document's last sentence) a random B. That skews the labels towards "random"
      (55-60% at length 128 on the default corpus, 78% at length 32). With True, such a chunk
      flips the usual coin and on "actual next" takes the document's next sentence as B, which
      keeps labels near 50/50; False reproduces BERT exactly.
    objective: "nsp" (above); "sop" (ALBERT): B is always the actual next segment and half of
      the pairs are swapped to (B, A) with label 1; "none": the actual next segment, label 0.
      With "sop" and "none" a chunk of one sentence takes the next sentence as B, and a
      document's lone last sentence is split into two halves.

  Returns:
    A :class:`PairSpans`.

  Raises:
    ValueError: ``max_seq_length`` is too small or the corpus has fewer than two documents.
  """
  _check_pair_inputs(corpus, max_seq_length, objective)
  stream = _UniformStream(rng)
  tokens = corpus.sentence_starts.tolist()
  documents = corpus.document_starts.tolist()
  options = (max_seq_length - 3, short_seq_prob, single_sentence_next, objective)
  rows = []
  num_unsplittable = 0
  for document in range(corpus.num_documents):
    num_unsplittable += _document_pairs(document, stream, tokens, documents, options, rows)
  if num_unsplittable:
    logging.info(
      "dropped %d one-token last sentences that cannot form two segments", num_unsplittable
    )
  # The truncation draws come after the stream's blocks, from the same Generator.
  return _truncated_spans(rows, rng)


def assemble_pairs(corpus, spans, *, max_seq_length, special_ids):
  """Lays pairs out as ``[CLS] A [SEP] B [SEP]`` followed by [PAD] (id 0 positions), vectorised.

  Args:
    corpus: the :class:`TokenizedDocuments` the spans point into.
    spans: a :class:`PairSpans` whose pairs fit in ``max_seq_length - 3`` tokens.
    max_seq_length: L.
    special_ids: a ``SpecialTokenIds`` (for [CLS], [SEP], [PAD]).

  Returns:
    A dict of int32 arrays: ``input_ids`` [N, L], ``token_type_ids`` [N, L] (0 for [CLS] A
    [SEP], 1 for B [SEP], 0 on padding), ``input_mask`` [N, L] (1 real, 0 padding) and
    ``next_sentence_labels`` [N].
  """
  if len(spans) and int((spans.a_end - spans.a_start + spans.b_end - spans.b_start).max()) > (
    max_seq_length - 3
  ):
    raise UserInputError(f"pairs longer than max_seq_length - 3 = {max_seq_length - 3} tokens")
  rows = {
    key: np.empty([len(spans), max_seq_length], np.int32)
    for key in ("input_ids", "token_type_ids", "input_mask")
  }
  # A block of rows at a time: the int64 [rows, L] temporaries stay a few MB at any size.
  for start in range(0, len(spans), _BLOCK_ROWS):
    block = np.arange(start, min(start + _BLOCK_ROWS, len(spans)))
    for key, value in _assemble_block(
      corpus, spans.take(block), max_seq_length, special_ids
    ).items():
      rows[key][block] = value
  rows["next_sentence_labels"] = spans.next_sentence_labels.astype(np.int32)
  return rows


def _assemble_block(corpus, spans, max_seq_length, special_ids):
  """`assemble_pairs`' sequence arrays for a block of rows."""
  length_a = (spans.a_end - spans.a_start)[:, None]
  length_b = (spans.b_end - spans.b_start)[:, None]
  position = np.arange(max_seq_length, dtype=np.int64)[None, :]
  in_a = (position >= 1) & (position <= length_a)
  b_first = length_a + 2
  in_b = (position >= b_first) & (position < b_first + length_b)
  last = b_first + length_b
  source = np.where(
    in_a,
    spans.a_start[:, None] + position - 1,
    np.where(in_b, spans.b_start[:, None] + position - b_first, 0),
  )
  input_ids = np.where(in_a | in_b, corpus.token_ids[source], special_ids.pad)
  input_ids = np.where(position == 0, special_ids.cls, input_ids)
  input_ids = np.where((position == length_a + 1) | (position == last), special_ids.sep, input_ids)
  return {
    "input_ids": input_ids.astype(np.int32),
    "token_type_ids": ((position >= b_first) & (position <= last)).astype(np.int32),
    "input_mask": (position <= last).astype(np.int32),
  }


class PairRows:
  """Sentence pairs whose rows are laid out on demand (`assemble_pairs` of the rows taken).

  A writer takes the rows a block at a time, so the [N, L] arrays of a whole window of text
  never exist at once: only the spans (five integers a pair) do.
  """

  def __init__(self, corpus, spans, *, max_seq_length, special_ids):
    self._corpus, self._spans = corpus, spans
    self._max_seq_length, self._special_ids = max_seq_length, special_ids

  def __len__(self):
    return len(self._spans)

  def take(self, indices):
    """The `assemble_pairs` arrays of the pairs at ``indices``, in that order."""
    return assemble_pairs(
      self._corpus,
      self._spans.take(np.asarray(indices, np.int64)),
      max_seq_length=self._max_seq_length,
      special_ids=self._special_ids,
    )


def create_sentence_pairs(corpus, *, max_seq_length, short_seq_prob, rng, special_ids):
  """Pairs up the whole corpus once and assembles the arrays (in document order).

  Args:
    corpus: a :class:`TokenizedDocuments` with at least two documents.
    max_seq_length: L, [CLS] and [SEP]s included.
    short_seq_prob: probability of a shorter random target length per document.
    rng: a ``numpy.random.Generator``.
    special_ids: a ``SpecialTokenIds``.

  Returns:
    The dict of :func:`assemble_pairs`.
  """
  spans = sample_pair_spans(
    corpus, max_seq_length=max_seq_length, short_seq_prob=short_seq_prob, rng=rng
  )
  return assemble_pairs(corpus, spans, max_seq_length=max_seq_length, special_ids=special_ids)
