"""A tokenised corpus in flat arrays: token ids, sentence offsets and document offsets.

Sentences of a document are stored back to back, so any run of consecutive sentences, and any
truncation of it, is one slice ``token_ids[start:end]``. Sentence pairs are then four integers
instead of copied lists, and batches can be assembled from any example index without replaying.
"""

import dataclasses
import itertools

import numpy as np

from bert_jax.errors import UserInputError

# Held-out documents are picked with this fixed seed, not the run's seed, so runs with
# different seeds evaluate on the same documents and their eval losses compare.
_EVAL_SPLIT_SEED = 0x5EED


@dataclasses.dataclass(frozen=True)
class TokenizedDocuments:
  """Documents of tokenised sentences, in flat arrays.

  Attributes:
    token_ids: [T] int32, every sentence's ids back to back.
    sentence_starts: [S + 1] int64; sentence s is ``token_ids[sentence_starts[s]:
      sentence_starts[s + 1]]``. Every sentence has at least one token.
    document_starts: [D + 1] int64; document d is sentences ``document_starts[d]`` to
      ``document_starts[d + 1] - 1``. Every document has at least one sentence.
  """

  token_ids: np.ndarray
  sentence_starts: np.ndarray
  document_starts: np.ndarray

  @property
  def num_documents(self):
    return len(self.document_starts) - 1

  @property
  def num_sentences(self):
    return len(self.sentence_starts) - 1

  @property
  def num_tokens(self):
    return len(self.token_ids)

  def document(self, index):
    """The sentences of one document as a list of int32 arrays (for inspection and tests)."""
    first, last = self.document_starts[index], self.document_starts[index + 1]
    return [
      self.token_ids[self.sentence_starts[s] : self.sentence_starts[s + 1]]
      for s in range(first, last)
    ]

  @classmethod
  def from_id_lists(cls, documents):
    """Builds the flat form from documents of sentences of token ids.

    Empty sentences, then empty documents, are dropped: a zero-token sentence would make an
    empty segment, and an empty document cannot give one.
    """
    sentences = []
    document_starts = [0]
    for document in documents:
      kept = [s for s in document if len(s)]
      if kept:
        sentences.extend(kept)
        document_starts.append(len(sentences))
    lengths = np.array([len(s) for s in sentences], dtype=np.int64)
    sentence_starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    token_ids = (
      np.concatenate([np.asarray(s, dtype=np.int32) for s in sentences])
      if sentences
      else np.zeros([0], np.int32)
    )
    return cls(
      token_ids.astype(np.int32), sentence_starts, np.array(document_starts, dtype=np.int64)
    )

  @staticmethod
  def concatenate(parts):
    """The documents of ``parts`` (a sequence of ``TokenizedDocuments``), in order."""
    token_offsets = np.cumsum([0] + [part.num_tokens for part in parts])
    sentence_offsets = np.cumsum([0] + [part.num_sentences for part in parts])
    return TokenizedDocuments(
      token_ids=np.concatenate([np.zeros([0], np.int32)] + [p.token_ids for p in parts]),
      sentence_starts=np.concatenate(
        [[0]] + [p.sentence_starts[1:] + o for p, o in zip(parts, token_offsets)]
      ).astype(np.int64),
      document_starts=np.concatenate(
        [[0]] + [p.document_starts[1:] + o for p, o in zip(parts, sentence_offsets)]
      ).astype(np.int64),
    )

  def select(self, document_indices):
    """A new corpus holding only the given documents, in the given order."""
    documents = np.asarray(document_indices, dtype=np.int64)
    first_sentence = self.document_starts[documents]
    end_sentence = self.document_starts[documents + 1]
    first_token = self.sentence_starts[first_sentence]
    end_token = self.sentence_starts[end_sentence]
    # A document's sentences and tokens are contiguous: copy one slice per document (no
    # index arrays as long as the corpus, which cost 16x the int32 ids).
    sentence_lengths = np.diff(self.sentence_starts)
    lengths = [sentence_lengths[a:b] for a, b in zip(first_sentence, end_sentence)]
    tokens = [self.token_ids[a:b] for a, b in zip(first_token, end_token)]
    lengths = np.concatenate(lengths) if lengths else np.zeros([0], np.int64)
    return TokenizedDocuments(
      token_ids=np.concatenate(tokens) if tokens else np.zeros([0], np.int32),
      sentence_starts=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
      document_starts=np.concatenate([[0], np.cumsum(end_sentence - first_sentence)]).astype(
        np.int64
      ),
    )

  def split(self, eval_fraction):
    """``(train documents, held-out documents or None)`` as `split_documents` divides them.

    Raises:
      UserInputError: as `split_documents`.
    """
    train, held_out = split_documents(self.num_documents, eval_fraction)
    return self.select(train), (self.select(held_out) if len(held_out) else None)


# Sentences tokenised per call: the tokenizer's per-token objects (strings, offsets) live only
# for one chunk, and its ids go straight into int32 arrays.
_TOKENIZE_CHUNK = 4096


def tokenize_documents(documents, tokenizer):
  """Tokenises documents of sentence strings, a chunk of sentences per batch call.

  Args:
    documents: list of documents, each a list of sentence strings.
    tokenizer: anything with ``encode_batch(list[str]) -> list[list[int]]``.

  Returns:
    A :class:`TokenizedDocuments` (sentences that tokenise to nothing are dropped, then
    documents left without a sentence), the same as `TokenizedDocuments.from_id_lists`.
  """
  flat = [sentence for document in documents for sentence in document]
  id_chunks, length_chunks = [], []
  for start in range(0, len(flat), _TOKENIZE_CHUNK):
    ids = tokenizer.encode_batch(flat[start : start + _TOKENIZE_CHUNK])
    length_chunks.append(np.fromiter(map(len, ids), np.int64, len(ids)))
    id_chunks.append(np.fromiter(itertools.chain.from_iterable(ids), np.int32))
  del flat
  lengths = np.concatenate(length_chunks) if length_chunks else np.zeros([0], np.int64)
  kept = lengths > 0
  # Kept sentences per document; documents left empty are dropped.
  document_of_sentence = np.repeat(
    np.arange(len(documents)), np.array([len(d) for d in documents], np.int64)
  )
  per_document = np.bincount(document_of_sentence[kept], minlength=len(documents))
  per_document = per_document[per_document > 0]
  return TokenizedDocuments(
    token_ids=np.concatenate(id_chunks) if id_chunks else np.zeros([0], np.int32),
    sentence_starts=np.concatenate([[0], np.cumsum(lengths[kept])]).astype(np.int64),
    document_starts=np.concatenate([[0], np.cumsum(per_document)]).astype(np.int64),
  )


def split_documents(num_documents, eval_fraction):
  """Splits document indices into train and held-out eval sets, the same way every run.

  Args:
    num_documents: number of documents in the corpus.
    eval_fraction: share of documents to hold out, in [0, 1). With a positive fraction at least
      two documents are held out, because next-sentence prediction draws its random segments
      from another document of the same split.

  Returns:
    ``(train_indices, eval_indices)``, each sorted.

  Raises:
    ValueError: the fraction is out of range or leaves a split with fewer than two documents.
  """
  if not 0.0 <= eval_fraction < 1.0:
    raise UserInputError(f"data.eval_fraction is {eval_fraction}; it must be in [0, 1)")
  num_eval = 0 if eval_fraction == 0.0 else max(2, round(eval_fraction * num_documents))
  if num_documents - num_eval < 2:
    raise UserInputError(
      f"the corpus has {num_documents} document(s) but needs at least {num_eval + 2}: 2 to "
      f"train on (sentence pairs draw from another document) and {num_eval} held out for "
      "eval; add documents (blank lines separate them)"
      + (" or set data.eval_fraction=0" if num_eval else "")
    )
  order = np.random.default_rng(_EVAL_SPLIT_SEED).permutation(num_documents)
  return np.sort(order[num_eval:]), np.sort(order[:num_eval])
