"""RoBERTa's FULL-SENTENCES packing with document ids, so attention never crosses documents.

Rows are filled with whole sentences taken contiguously from one document after another:
``[CLS] d1 ... [SEP] d2 ... [SEP] [PAD]...``. Every document part ends with [SEP], and
``input_mask`` holds the part's document id within the row (1, 2, 3, ...; 0 on padding), which
the model turns into block-diagonal attention. A sentence that does not fit in what is left of a
row starts the next row; a sentence longer than a whole row is cut into row-sized pieces (counted,
because those pieces lose their context). There is no sentence-level objective: labels are 0.
"""

import dataclasses

import numpy as np

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
