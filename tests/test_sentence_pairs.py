"""Sentence pairs: equal to a literal transcription of BERT's algorithm, well formed, balanced."""

import numpy as np
import pytest

from bert_jax.data import (
  default_corpus,
  sentence_pairs,
  text_corpus,
  tokenization,
  tokenized_corpus,
)


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.load_wordpiece(default_corpus.default_vocab_path())


@pytest.fixture(scope="module")
def corpus(tokenizer):
  documents = text_corpus.read_documents(default_corpus.default_corpus_path())
  return tokenized_corpus.tokenize_documents(documents, tokenizer)


def bert_truncation_counts(length_a, length_b, max_num_tokens):
  """BERT's truncate_seq_pair, one token at a time, counting removals per segment."""
  removed_a = removed_b = 0
  while length_a + length_b > max_num_tokens:
    if length_a > length_b:
      length_a, removed_a = length_a - 1, removed_a + 1
    else:
      length_b, removed_b = length_b - 1, removed_b + 1
  return removed_a, removed_b


def reference_bert_pairs(documents, max_seq_length, short_seq_prob, rng):
  """BERT's create_instances_from_document over all documents, written with Python lists.

  Draws its random numbers from the same stream, in the same order, as the implementation, so
  the pairs must match exactly (before truncation, which is checked separately).
  """
  stream = sentence_pairs._UniformStream(rng)  # pylint: disable=protected-access
  max_num_tokens = max_seq_length - 3
  pairs = []
  for document_index, document in enumerate(documents):
    target = max_num_tokens
    if stream.uniform() < short_seq_prob:
      target = stream.integer(2, max_num_tokens + 1)
    chunk, chunk_length, i = [], 0, 0
    while i < len(document):
      chunk.append(list(document[i]))
      chunk_length += len(document[i])
      if i == len(document) - 1 or chunk_length >= target:
        a_end = 1 if len(chunk) == 1 else stream.integer(1, len(chunk))
        tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
        if len(chunk) == 1 or stream.uniform() < 0.5:
          label = 1
          target_b = target - len(tokens_a)
          for _ in range(10):
            other = stream.integer(0, len(documents))
            if other != document_index:
              break
          tokens_b = []
          for sentence in documents[other][stream.integer(0, len(documents[other])) :]:
            tokens_b.extend(sentence)
            if len(tokens_b) >= target_b:
              break
          i -= len(chunk) - a_end
        else:
          label = 0
          tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
        pairs.append((tokens_a, tokens_b, label))
        chunk, chunk_length = [], 0
      i += 1
  return pairs


def test_truncation_counts_equal_bert_loop():
  for max_num_tokens in (2, 5, 13, 61):
    for length_a in range(1, 40):
      for length_b in range(1, 40):
        assert sentence_pairs._truncation_counts(  # pylint: disable=protected-access
          length_a, length_b, max_num_tokens
        ) == bert_truncation_counts(length_a, length_b, max_num_tokens)


@pytest.mark.parametrize("max_seq_length,short_seq_prob", [(64, 0.3), (128, 0.1), (24, 0.0)])
def test_equals_literal_bert_algorithm(corpus, max_seq_length, short_seq_prob):
  small = corpus.select(np.arange(12))
  documents = [small.document(d) for d in range(small.num_documents)]
  expected = reference_bert_pairs(
    documents, max_seq_length, short_seq_prob, np.random.default_rng(5)
  )
  spans = sentence_pairs.sample_pair_spans(
    small,
    max_seq_length=max_seq_length,
    short_seq_prob=short_seq_prob,
    rng=np.random.default_rng(5),
    single_sentence_next=False,
  )
  assert len(spans) == len(expected) > 100
  for k, (tokens_a, tokens_b, label) in enumerate(expected):
    assert spans.next_sentence_labels[k] == label
    cut_a, cut_b = bert_truncation_counts(len(tokens_a), len(tokens_b), max_seq_length - 3)
    a = small.token_ids[spans.a_start[k] : spans.a_end[k]].tolist()
    b = small.token_ids[spans.b_start[k] : spans.b_end[k]].tolist()
    assert len(a) == len(tokens_a) - cut_a and len(b) == len(tokens_b) - cut_b
    # The kept tokens are a contiguous run: `front` removed from the front, the rest at the back.
    assert any(a == tokens_a[front : front + len(a)] for front in range(cut_a + 1))
    assert any(b == tokens_b[front : front + len(b)] for front in range(cut_b + 1))


def document_of(corpus, token_offsets):
  first_tokens = corpus.sentence_starts[corpus.document_starts[:-1]]
  return np.searchsorted(first_tokens, token_offsets, side="right") - 1


@pytest.mark.parametrize("single_sentence_next", [True, False])
def test_pairs_are_well_formed(corpus, tokenizer, single_sentence_next):
  special = tokenizer.special_ids
  length = 64
  spans = sentence_pairs.sample_pair_spans(
    corpus,
    max_seq_length=length,
    short_seq_prob=0.1,
    rng=np.random.default_rng(1),
    single_sentence_next=single_sentence_next,
  )
  out = sentence_pairs.assemble_pairs(corpus, spans, max_seq_length=length, special_ids=special)
  ids, types, mask = out["input_ids"], out["token_type_ids"], out["input_mask"]
  assert ids.shape == types.shape == mask.shape == (len(spans), length)
  assert all(a.dtype == np.int32 for a in out.values())
  length_a = spans.a_end - spans.a_start
  length_b = spans.b_end - spans.b_start
  assert length_a.min() >= 1 and length_b.min() >= 1
  assert (length_a + length_b).max() == length - 3
  for k in range(0, len(spans), 7):
    la, lb = length_a[k], length_b[k]
    expected = np.concatenate(
      [
        [special.cls],
        corpus.token_ids[spans.a_start[k] : spans.a_end[k]],
        [special.sep],
        corpus.token_ids[spans.b_start[k] : spans.b_end[k]],
        [special.sep],
        np.full(length - la - lb - 3, special.pad),
      ]
    )
    np.testing.assert_array_equal(ids[k], expected)
    np.testing.assert_array_equal(
      types[k], [0] * (la + 2) + [1] * (lb + 1) + [0] * (length - la - lb - 3)
    )
    np.testing.assert_array_equal(mask[k], [1] * (la + lb + 3) + [0] * (length - la - lb - 3))
  # Segments hold no special tokens; exactly one [CLS] and two [SEP]s per row.
  assert np.all((ids == special.cls).sum(1) == 1) and np.all((ids == special.sep).sum(1) == 2)
  # "Is next": B follows A in the same document (directly, unless truncation cut between).
  doc_a = document_of(corpus, spans.a_start)
  doc_b = document_of(corpus, spans.b_start)
  is_next = out["next_sentence_labels"] == 0
  assert np.all(doc_a[is_next] == doc_b[is_next])
  assert np.all(spans.b_start[is_next] >= spans.a_end[is_next])
  untruncated = is_next & (length_a + length_b < length - 3)
  assert untruncated.sum() > 100
  assert np.all(spans.b_start[untruncated] == spans.a_end[untruncated])
  # "Random": B comes from another document.
  assert np.all(doc_a[~is_next] != doc_b[~is_next])


def test_next_sentence_labels_are_balanced(corpus):
  means = []
  for seed in range(3):
    labels = sentence_pairs.sample_pair_spans(
      corpus, max_seq_length=128, short_seq_prob=0.1, rng=np.random.default_rng(seed)
    ).next_sentence_labels
    assert set(np.unique(labels)) == {0, 1}
    means.append(labels.mean())
  assert max(abs(m - 0.5) for m in means) < 0.03
  assert abs(np.mean(means) - 0.5) < 0.02
  # BERT's exact pairing forces "random" for one-sentence chunks, which skews the labels.
  skewed = sentence_pairs.sample_pair_spans(
    corpus,
    max_seq_length=64,
    short_seq_prob=0.1,
    rng=np.random.default_rng(0),
    single_sentence_next=False,
  ).next_sentence_labels
  assert skewed.mean() > 0.53


def test_short_seq_prob_controls_length(corpus, tokenizer):
  fill = {}
  for prob in (0.0, 1.0):
    out = sentence_pairs.create_sentence_pairs(
      corpus,
      max_seq_length=128,
      short_seq_prob=prob,
      rng=np.random.default_rng(0),
      special_ids=tokenizer.special_ids,
    )
    fill[prob] = out["input_mask"].sum(1)
  assert (fill[0.0] < 64).mean() < 0.01 and fill[0.0].mean() > 125
  assert (fill[1.0] < 64).mean() > 0.15 and fill[1.0].mean() < 100


def test_deterministic_for_a_seed(corpus, tokenizer):
  def make(seed):
    return sentence_pairs.create_sentence_pairs(
      corpus,
      max_seq_length=48,
      short_seq_prob=0.1,
      rng=np.random.default_rng(seed),
      special_ids=tokenizer.special_ids,
    )

  first, again, other = make(3), make(3), make(4)
  for key in first:
    np.testing.assert_array_equal(first[key], again[key])
  assert first["input_ids"].shape != other["input_ids"].shape or not np.array_equal(
    first["input_ids"], other["input_ids"]
  )


def test_bad_input(corpus, tokenizer):
  with pytest.raises(ValueError, match=r"max_seq_length is 4; a sentence pair needs at least 5"):
    sentence_pairs.sample_pair_spans(
      corpus, max_seq_length=4, short_seq_prob=0.1, rng=np.random.default_rng(0)
    )
  with pytest.raises(ValueError, match="need at least 2 documents, the corpus has 1"):
    sentence_pairs.sample_pair_spans(
      corpus.select([0]), max_seq_length=32, short_seq_prob=0.1, rng=np.random.default_rng(0)
    )
  spans = sentence_pairs.sample_pair_spans(
    corpus.select([0, 1]), max_seq_length=64, short_seq_prob=0.0, rng=np.random.default_rng(0)
  )
  with pytest.raises(ValueError, match="pairs longer than max_seq_length - 3 = 29"):
    sentence_pairs.assemble_pairs(
      corpus, spans, max_seq_length=32, special_ids=tokenizer.special_ids
    )


def test_from_id_lists_drops_empty_sentences_and_documents():
  corpus = tokenized_corpus.TokenizedDocuments.from_id_lists(
    [[[5, 6], [], [7]], [], [[], []], [[8, 9, 10]]]
  )
  assert corpus.num_documents == 2 and corpus.num_sentences == 3
  assert [s.tolist() for s in corpus.document(0)] == [[5, 6], [7]]
  assert [s.tolist() for s in corpus.select([1, 0]).document(0)] == [[8, 9, 10]]


def test_tokenising_in_chunks_equals_one_batch(tokenizer, monkeypatch):
  documents = [["Hello world.", "", "Another one here."], [], ["", " "], ["Last document."]]
  whole = tokenized_corpus.TokenizedDocuments.from_id_lists(
    [tokenizer.encode_batch(d) if d else [] for d in documents]
  )
  monkeypatch.setattr(tokenized_corpus, "_TOKENIZE_CHUNK", 2)  # Chunks split documents.
  chunked = tokenized_corpus.tokenize_documents(documents, tokenizer)
  assert chunked.num_documents == 2 and chunked.num_sentences == 3
  for field in ("token_ids", "sentence_starts", "document_starts"):
    np.testing.assert_array_equal(getattr(chunked, field), getattr(whole, field))
    assert getattr(chunked, field).dtype == getattr(whole, field).dtype


def test_pair_rows_are_the_assembled_rows_a_block_at_a_time(corpus, tokenizer, monkeypatch):
  spans = sentence_pairs.sample_pair_spans(
    corpus, max_seq_length=64, short_seq_prob=0.1, rng=np.random.default_rng(0)
  )
  special = tokenizer.special_ids
  monkeypatch.setattr(sentence_pairs, "_BLOCK_ROWS", len(spans))  # All rows in one block.
  whole = sentence_pairs.assemble_pairs(corpus, spans, max_seq_length=64, special_ids=special)
  monkeypatch.setattr(sentence_pairs, "_BLOCK_ROWS", 7)
  order = np.random.default_rng(1).permutation(len(spans))[:100]
  rows = sentence_pairs.PairRows(corpus, spans, max_seq_length=64, special_ids=special)
  taken = rows.take(order)
  assert len(rows) == len(spans) and set(taken) == set(whole)
  for key, value in whole.items():
    np.testing.assert_array_equal(taken[key], value[order])
    assert taken[key].dtype == np.int32
