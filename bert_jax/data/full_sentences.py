"""RoBERTa's FULL-SENTENCES packing with document ids, so attention never crosses documents.

Rows are filled with whole sentences taken contiguously from one document after another:
``[CLS] d1 ... [SEP] d2 ... [SEP] [PAD]...``. Every document part ends with [SEP], and
``input_mask`` holds the part's document id within the row (1, 2, 3, ...; 0 on padding), which
the model turns into block-diagonal attention. A sentence that does not fit in what is left of a
row starts the next row; a sentence longer than a whole row is cut into row-sized pieces (counted,
because those pieces lose their context). There is no sentence-level objective: labels are 0.

`pack_full_sentences` packs once (``create_pretraining_data --style=full_sentences`` records);
`FullSentenceExamples` is the same packing as the in-memory pretraining stream
(``data.packing='full_sentences'``): every epoch packs the documents in a new order, and the
masking, applied when a batch is read, differs every time a row is seen (dynamic masking).
"""

import dataclasses
import threading

import numpy as np
from absl import logging

from bert_jax.data import pretraining_examples

# A document part needs at least one token and its [SEP].
_MIN_PART = 2


@dataclasses.dataclass
class PackingCounts:
  """What packing had to cut, for the tool's report (never silent)."""

  rows: int = 0
  documents_across_rows: int = 0
  sentences_cut: int = 0


def pack_full_sentences(corpus, *, max_seq_length, special_ids, document_order=None):
  """Packs a tokenised corpus into rows of whole sentences with per-row document ids.

  Args:
    corpus: a ``TokenizedDocuments``.
    max_seq_length: L, [CLS] and [SEP]s included (at least 3).
    special_ids: a ``SpecialTokenIds``.
    document_order: the order in which documents are packed (default: corpus order).

  Returns:
    ``(arrays, counts)``: a dict of int32 arrays ``input_ids``, ``token_type_ids`` (all 0),
    ``input_mask`` (document id per token, 0 on padding) of shape [N, L] and
    ``next_sentence_labels`` [N] (all 0); and a :class:`PackingCounts`.
  """
  capacity = max_seq_length - 1  # After [CLS].
  counts = PackingCounts()
  rows_ids, rows_docs = [], []
  ids, docs = [special_ids.cls], [1]
  tokens = corpus.token_ids
  sentence_starts = corpus.sentence_starts
  order = range(corpus.num_documents) if document_order is None else document_order

  def finish_row():
    nonlocal ids, docs
    if len(ids) > 1:
      rows_ids.append(ids)
      rows_docs.append(docs)
    ids, docs = [special_ids.cls], [1]

  for document in order:
    first, stop = corpus.document_starts[document], corpus.document_starts[document + 1]
    part_open = False  # Whether this document already has tokens in the current row.
    rows_used = 0
    for sentence in range(first, stop):
      piece = tokens[sentence_starts[sentence] : sentence_starts[sentence + 1]].tolist()
      if len(piece) + 1 > capacity:
        counts.sentences_cut += 1
      while piece:
        # Tokens that still fit before the part's closing [SEP].
        room = capacity - len(ids)
        # A full row, or a sentence that fits a fresh row but not this one: next row.
        if room < _MIN_PART - 1 or (len(piece) > room and len(piece) + 1 <= capacity):
          if part_open:
            ids.append(special_ids.sep)
            docs.append(docs[-1])
          finish_row()
          part_open = False
          continue
        if not part_open:
          # [CLS] carries id 1, so the row's first part is document 1.
          doc_id = docs[-1] + 1 if len(ids) > 1 else 1
          rows_used += 1
          part_open = True
        else:
          doc_id = docs[-1]
        take = piece[:room]
        piece = piece[room:]
        ids.extend(take)
        docs.extend([doc_id] * len(take))
    if part_open:
      ids.append(special_ids.sep)
      docs.append(docs[-1])
    counts.documents_across_rows += rows_used > 1
  finish_row()
  num_rows = len(rows_ids)
  counts.rows = num_rows
  input_ids = np.full([num_rows, max_seq_length], special_ids.pad, np.int32)
  input_mask = np.zeros([num_rows, max_seq_length], np.int32)
  for row, (row_ids, row_docs) in enumerate(zip(rows_ids, rows_docs)):
    input_ids[row, : len(row_ids)] = row_ids
    input_mask[row, : len(row_docs)] = row_docs
  return {
    "input_ids": input_ids,
    "token_type_ids": np.zeros_like(input_ids),
    "input_mask": input_mask,
    "next_sentence_labels": np.zeros([num_rows], np.int32),
  }, counts


class FullSentenceExamples:
  """Packed rows by global index: an endless train stream, or the fixed eval set.

  The interface of `pretraining_examples.TrainExamples` / ``EvalExamples``: epoch ``e`` (train)
  packs the documents in an order seeded by ``(seed, e)`` and shuffles the rows, cut or topped
  up to epoch 0's row count so that example ``g`` is row ``g % epoch_size`` of epoch
  ``g // epoch_size``; eval packs the held-out documents once, in order, and keeps a fixed
  sample of ``num_examples`` rows.
  """

  def __init__(self, corpus, *, max_seq_length, special_ids, seed=None, num_examples=None):
    """Packs epoch 0 (train, ``seed`` given) or the eval rows (``seed`` None)."""
    self._corpus = corpus
    self._pack = dict(max_seq_length=max_seq_length, special_ids=special_ids)
    self._lock = threading.Lock()
    self._epochs = {}
    self._train = seed is not None
    stream = pretraining_examples.stream_seed
    if self._train:
      self._seed = seed % 2**64
      self.masking_seed = stream(seed, pretraining_examples.TRAIN_STREAM)
      self._epoch_size = None
      self._epoch_size = len(self._rows(0)["input_ids"])
      self.num_examples = None  # Endless.
    else:
      self.masking_seed = stream(pretraining_examples.EVAL_SEED, pretraining_examples.EVAL_STREAM)
      arrays, counts = pack_full_sentences(corpus, **self._pack)
      rng = np.random.default_rng([pretraining_examples.EVAL_SEED, len(arrays["input_ids"])])
      keep = np.sort(rng.permutation(counts.rows)[:num_examples])
      self._eval = {key: value[keep] for key, value in arrays.items()}
      self.num_examples = len(keep)
    logging.info("full-sentence rows from %d documents", corpus.num_documents)

  @property
  def epoch_size(self):
    return self._epoch_size

  def _rows(self, epoch):
    with self._lock:
      if epoch not in self._epochs:
        rng = np.random.default_rng([self._seed, pretraining_examples.TRAIN_STREAM, epoch])
        order = rng.permutation(self._corpus.num_documents)
        arrays, counts = pack_full_sentences(self._corpus, document_order=order, **self._pack)
        size = self._epoch_size or counts.rows
        rows = rng.permutation(counts.rows)[:size]
        if len(rows) < size:  # A fuller packing: top up with a sample of its own rows.
          rows = np.concatenate([rows, rng.choice(rows, size - len(rows))])
        self._epochs = {
          e: v for e, v in self._epochs.items() if e == epoch - 1
        }  # The current epoch and the one before, which a batch may straddle.
        self._epochs[epoch] = {key: value[rows] for key, value in arrays.items()}
      return self._epochs[epoch]

  def examples(self, indices):
    """Unmasked rows at global ``indices`` (int64 array), as numpy arrays."""
    indices = np.asarray(indices, dtype=np.int64)
    if not self._train:
      return {key: value[indices] for key, value in self._eval.items()}
    epochs, slots = indices // self._epoch_size, indices % self._epoch_size
    out = {}
    for epoch in np.unique(epochs):
      rows = self._rows(int(epoch))
      chosen = epochs == epoch
      for key, value in rows.items():
        out.setdefault(key, np.zeros((len(indices),) + value.shape[1:], value.dtype))
        out[key][chosen] = value[slots[chosen]]
    return out
