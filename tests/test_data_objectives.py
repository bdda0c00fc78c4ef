"""Sentence-level objectives: NSP and SOP labels balanced, SOP negatives swapped, none, config."""

import dataclasses

import numpy as np
import pytest

from bert_jax.data import (
  default_corpus,
  pretraining_config,
  pretraining_pipeline,
  sentence_pairs,
  text_corpus,
  tokenization,
  tokenized_corpus,
)
from bert_jax.default_config import base_config
from bert_jax.train import settings as settings_lib
from bert_jax.train import setup

SEQ_LEN = 128


@pytest.fixture(scope="module")
def corpus():
  tokenizer = tokenization.load_wordpiece(default_corpus.default_vocab_path())
  documents = text_corpus.read_documents(default_corpus.default_corpus_path())
  return tokenized_corpus.tokenize_documents(documents, tokenizer)


def pairs(corpus, objective, seed=0):
  return sentence_pairs.sample_pair_spans(
    corpus,
    max_seq_length=SEQ_LEN,
    short_seq_prob=0.1,
    rng=np.random.default_rng(seed),
    objective=objective,
  )


def document_of(corpus, token_offsets):
  first_tokens = corpus.sentence_starts[corpus.document_starts]
  return np.searchsorted(first_tokens, token_offsets, side="right") - 1


def untruncated(spans):
  """Pairs whose segments were not cut: BERT only truncates pairs over max_seq_length - 3."""
  total = (spans.a_end - spans.a_start) + (spans.b_end - spans.b_start)
  return total < SEQ_LEN - 3


@pytest.mark.parametrize("objective", ["nsp", "sop"])
def test_labels_are_balanced(corpus, objective):
  labels = np.concatenate(
    [pairs(corpus, objective, seed).next_sentence_labels for seed in range(3)]
  )
  assert len(labels) > 10_000
  assert abs(labels.mean() - 0.5) < 0.02, labels.mean()


def test_sop_negatives_are_the_consecutive_segments_swapped(corpus):
  spans = pairs(corpus, "sop")
  negative = spans.next_sentence_labels == 1
  # Every pair's segments are from one document, in order (positive) or reversed (negative).
  same_document = document_of(corpus, spans.a_start) == document_of(corpus, spans.b_start)
  assert np.all(same_document)
  assert np.all(spans.a_end[~negative] <= spans.b_start[~negative])
  assert np.all(spans.b_end[negative] <= spans.a_start[negative])
  # Without truncation the two segments are adjacent: B then A for negatives, A then B else.
  whole = untruncated(spans)
  assert (whole & negative).sum() > 100 and (whole & ~negative).sum() > 100
  np.testing.assert_array_equal(spans.b_end[whole & negative], spans.a_start[whole & negative])
  np.testing.assert_array_equal(spans.a_end[whole & ~negative], spans.b_start[whole & ~negative])
  # Segments are never empty.
  assert np.all(spans.a_end > spans.a_start) and np.all(spans.b_end > spans.b_start)


def test_sop_negative_is_the_positive_swapped_in_the_assembled_arrays(corpus):
  special = tokenization.load_wordpiece(default_corpus.default_vocab_path()).special_ids
  spans = pairs(corpus, "sop")
  negative = np.flatnonzero((spans.next_sentence_labels == 1) & untruncated(spans))[:50]
  swapped = sentence_pairs.PairSpans(
    a_start=spans.b_start[negative],
    a_end=spans.b_end[negative],
    b_start=spans.a_start[negative],
    b_end=spans.a_end[negative],
    next_sentence_labels=np.zeros(len(negative), np.int32),
  )
  as_positive = sentence_pairs.assemble_pairs(
    corpus, swapped, max_seq_length=SEQ_LEN, special_ids=special
  )
  as_negative = sentence_pairs.assemble_pairs(
    corpus, spans.take(negative), max_seq_length=SEQ_LEN, special_ids=special
  )
  for row in range(len(negative)):
    ids_pos, ids_neg = as_positive["input_ids"][row], as_negative["input_ids"][row]
    types_pos, types_neg = as_positive["token_type_ids"][row], as_negative["token_type_ids"][row]
    real = as_positive["input_mask"][row] > 0
    segment = lambda ids, types, t, real=real: ids[1:][(types[1:] == t) & real[1:]][:-1]
    np.testing.assert_array_equal(segment(ids_pos, types_pos, 0), segment(ids_neg, types_neg, 1))
    np.testing.assert_array_equal(segment(ids_pos, types_pos, 1), segment(ids_neg, types_neg, 0))


def test_none_is_the_actual_next_segment(corpus):
  spans = pairs(corpus, "none")
  assert np.all(spans.next_sentence_labels == 0)
  whole = untruncated(spans)
  np.testing.assert_array_equal(spans.a_end[whole], spans.b_start[whole])


def test_pipeline_objective_and_trainer_head():
  config = pretraining_config.PretrainingDataConfig(
    max_seq_length=64, max_predictions_per_seq=10, objective="sop", masking="whole_word"
  )
  data = pretraining_pipeline.PretrainingData(config)
  batch = next(data.batches(split="train", seed=0, global_batch_size=256))
  assert 0.4 < batch["next_sentence_labels"].mean() < 0.6
  assert batch["masked_lm_weights"].sum() > 256 * 5
  config = base_config()
  for objective, use_nsp in (("nsp", True), ("sop", True), ("none", False)):
    config.data.objective = objective
    assert setup.make_task(settings_lib.settings_from_config(config)).use_nsp == use_nsp
  with pytest.raises(ValueError, match=r"data.objective is 'mlm'; choose one of"):
    dataclasses.replace(pretraining_config.PretrainingDataConfig(), objective="mlm")
