"""Consecutive segments of document streams, for segment-level recurrence (Transformer-XL).

The corpus's documents are laid end to end and cut into one contiguous stream per global batch
row (Transformer-XL's "batchify"); step t gives every row its t-th segment, so a row's memory
from step t - 1 is exactly the text before its segment at step t. Each token carries its
document's id (1, 2, ...): a model given those ids attends only within a document, which resets
the memory at document boundaries, and a label that starts a new document has weight 0.

A batch is a pure function of (step, process): nothing is replayed, so a resumed run gets the
very batches an uninterrupted one would, and each host builds only its own rows.
"""

import dataclasses

import numpy as np

from bert_jax.data.tokenized_corpus import TokenizedDocuments
from bert_jax.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class SegmentStream:
  """Rows of consecutive segments over one corpus.

  Attributes:
    token_ids: [T] int32 tokens of every document, back to back.
    document_ids: [T] int32, 1-based document index of each token.
    global_rows: rows of the global batch (each its own contiguous stream).
    segment_len: tokens per segment.
  """

  token_ids: np.ndarray
  document_ids: np.ndarray
  global_rows: int
  segment_len: int

  @classmethod
  def from_documents(cls, corpus: TokenizedDocuments, global_rows: int, segment_len: int):
    """Lays out ``corpus`` for ``global_rows`` rows of ``segment_len``-token segments.

    Raises:
      UserInputError: the corpus gives no row even one segment (plus the next-token label).
    """
    tokens_per_document = np.diff(corpus.sentence_starts[corpus.document_starts])
    document_ids = np.repeat(
      np.arange(1, corpus.num_documents + 1, dtype=np.int32), tokens_per_document
    )
    stream = cls(corpus.token_ids, document_ids, global_rows, segment_len)
    if stream.segments_per_epoch < 1:
      raise UserInputError(
        f"{corpus.num_tokens} corpus tokens do not give {global_rows} rows one "
        f"{segment_len}-token segment each; lower global_batch_size or the segment length"
      )
    return stream

  @property
  def row_len(self) -> int:
    return len(self.token_ids) // self.global_rows

  @property
  def segments_per_epoch(self) -> int:
    """Segments per row before the streams start again (the last token only as a label)."""
    return (self.row_len - 1) // self.segment_len

  def batch(self, step: int, process_index: int = 0, process_count: int = 1):
    """This process's rows at ``step``: its share of the global rows, in order.

    Returns:
      dict of numpy arrays [rows, segment_len]: ``input_ids``, ``document_ids`` (the
      model's segment ids), ``labels`` (the next token) and ``label_weights`` (0 where the
      next token starts another document).
    """
    if self.global_rows % process_count:
      raise UserInputError(
        f"global_batch_size={self.global_rows} is not divisible by the {process_count} processes"
      )
    local_rows = self.global_rows // process_count
    rows = np.arange(process_index * local_rows, (process_index + 1) * local_rows)
    epoch, segment = divmod(step, self.segments_per_epoch)
    start = segment * self.segment_len
    offsets_RL = (rows * self.row_len + start)[:, None] + np.arange(self.segment_len)[None, :]
    documents_RL = self.document_ids[offsets_RL]
    # Odd epochs number their documents after the last one: a row that wraps around (or lies
    # inside one long document) must not take the end of its stream as the memory of its start.
    epoch_offset = np.int32(epoch % 2 * self.document_ids[-1])
    return {
      "input_ids": self.token_ids[offsets_RL],
      "document_ids": documents_RL + epoch_offset,
      "labels": self.token_ids[offsets_RL + 1],
      "label_weights": (self.document_ids[offsets_RL + 1] == documents_RL).astype(np.float32),
    }
