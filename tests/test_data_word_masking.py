"""Whole-word and SpanBERT span masking over 10,000 real sequences: budgets, words, lengths."""

import dataclasses

import numpy as np
import pytest

from bert_jax.data import default_corpus, mask_positions, masking, tokenization
from tests import helpers

tf = masking.tf

SEQ_LEN = 128
MAX_PREDICTIONS = 20
NUM_SEQUENCES = 10_000


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.load_wordpiece(default_corpus.default_vocab_path())


@pytest.fixture(scope="module")
def sequences(tokenizer):
  """10,000 full-length real sentence pairs, so the 15% budget stays under the 20 slots."""
  return helpers.real_sentence_pairs(
    tokenizer, count=NUM_SEQUENCES, max_seq_length=SEQ_LEN, short_seq_prob=0.0
  )


def make_config(tokenizer, strategy, **overrides):
  return masking.MaskingConfig(
    max_predictions_per_seq=MAX_PREDICTIONS,
    mask_prob=0.15,
    vocab_size=tokenizer.vocab_size,
    special_ids=tokenizer.special_ids,
    random_token_low=tokenizer.first_regular_id,
    strategy=strategy,
    continuation=tuple(tokenizer.is_continuation().tolist()),
    **overrides,
  )


def run_rows(function, input_ids, seed=3):
  """Maps ``function(ids, seed)`` over rows in tf.data (seed = [seed, row]), stacked by key."""
  dataset = tf.data.Dataset.from_tensor_slices(
    (input_ids, np.arange(len(input_ids), dtype=np.int64))
  )
  dataset = dataset.map(
    lambda ids, i: function(ids, tf.stack([tf.constant(seed, tf.int64), i])),
    num_parallel_calls=tf.data.AUTOTUNE,
    deterministic=True,
  ).batch(2048)
  batches = list(dataset.as_numpy_iterator())
  return {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}


def words_of(row, maskable_row, continuation):
  """(start, end) token ranges of the words of one row, as the strategies define words."""
  words = []
  for position in np.flatnonzero(maskable_row):
    if continuation[row[position]] and words and words[-1][1] == position:
      words[-1][1] = position + 1
    else:
      words.append([position, position + 1])
  return words


def chosen_matrix(masked, shape):
  real = masked["masked_lm_weights"] > 0
  rows = np.repeat(np.arange(shape[0]), MAX_PREDICTIONS).reshape(real.shape)
  chosen = np.zeros(shape, bool)
  chosen[rows[real], masked["masked_lm_positions"][real]] = True
  return chosen


@pytest.fixture(scope="module", params=["whole_word", "span"])
def strategy_run(request, tokenizer, sequences):
  config = make_config(tokenizer, request.param)
  masked = run_rows(lambda ids, seed: masking.mask_example(ids, seed, config), sequences)
  return request.param, config, masked


def test_rate_words_and_specials(strategy_run, sequences, tokenizer):
  strategy, _, masked = strategy_run
  special = tokenizer.special_ids
  maskable = masking.maskable_positions(sequences, special)
  chosen = chosen_matrix(masked, sequences.shape)
  assert not np.any(chosen & ~maskable)  # [CLS], [SEP], padding never chosen.
  budget = np.array(
    [min(MAX_PREDICTIONS, max(1, round(n * 0.15))) for n in maskable.sum(axis=1).tolist()]
  )
  assert np.all(chosen.sum(axis=1) <= budget)
  rate = chosen.sum() / maskable.sum()
  if strategy == "whole_word":
    assert abs(rate - 0.15) < 0.005, rate
  else:
    # Span choice stops at the first span that does not fit and cuts it to whole words.
    assert 0.14 < rate <= 0.15, rate
  continuation = tokenizer.is_continuation()
  split_words = multi_piece = 0
  for row in range(0, NUM_SEQUENCES, 4):
    for start, end in words_of(sequences[row], maskable[row], continuation):
      picked = chosen[row, start:end]
      split_words += picked.any() and not picked.all()
      multi_piece += picked.all() and end - start > 1
  assert split_words == 0 and multi_piece > 500
  # 80/10/10 still applies to the chosen positions.
  new = masked["input_ids"][chosen]
  assert abs((new == special.mask).mean() - 0.8) < 0.01
  assert abs((new == sequences[chosen]).mean() - 0.1) < 0.01


def test_span_lengths_follow_truncated_geometric(tokenizer, sequences):
  config = make_config(tokenizer, "span")
  probabilities = mask_positions.span_length_probabilities(0.2, 10)
  expected_mean = float((np.arange(1, 11) * probabilities).sum())
  assert abs(expected_mean - 3.797) < 1e-3  # SpanBERT's quoted mean of 3.8 words.
  special = config.special_ids

  def draws(ids, seed):
    ids = tf.cast(ids, tf.int32)
    position_seed = tf.unstack(tf.random.experimental.stateless_split(seed, num=2))[0]
    chosen, lengths, used = mask_positions.span_choice(
      ids, masking.maskable_positions(ids, special), position_seed, config
    )
    return {"chosen": chosen, "lengths": lengths, "used": used}

  result = run_rows(draws, sequences)
  used = np.arange(MAX_PREDICTIONS)[None, :] < result["used"][:, None]
  lengths = result["lengths"][used]
  assert len(lengths) > 30_000
  # The spans a choice uses up to the one that ends it: by Wald's identity their mean length is
  # the distribution's mean, and their histogram its probabilities.
  assert abs(lengths.mean() / expected_mean - 1) < 0.05, lengths.mean()
  histogram = np.bincount(lengths, minlength=11)[1:] / len(lengths)
  np.testing.assert_allclose(histogram, probabilities, atol=0.01)
  # The chosen tokens are runs of whole words: the masked runs of the real output.
  masked = run_rows(lambda ids, seed: masking.mask_example(ids, seed, config), sequences[:2000])
  np.testing.assert_array_equal(chosen_matrix(masked, (2000, SEQ_LEN)), result["chosen"][:2000])
  run_words = []
  continuation = tokenizer.is_continuation()
  maskable = masking.maskable_positions(sequences[:2000], special)
  for row in range(2000):
    run = 0
    for start, _ in words_of(sequences[row], maskable[row], continuation):
      if result["chosen"][row, start]:
        run += 1
      elif run:
        run_words.append(run)
        run = 0
    if run:
      run_words.append(run)
  # Contiguous masked words: spans, sometimes merged, sometimes cut; far longer than single
  # words and bounded by merged spans.
  assert 2.5 < np.mean(run_words) < 2 * expected_mean, np.mean(run_words)


def test_deterministic_and_config_errors(tokenizer, sequences):
  config = make_config(tokenizer, "whole_word")
  first = masking.mask_example(tf.constant(sequences[5]), tf.constant([1, 5], tf.int64), config)
  again = masking.mask_example(tf.constant(sequences[5]), tf.constant([1, 5], tf.int64), config)
  for key in first:
    np.testing.assert_array_equal(first[key].numpy(), again[key].numpy())
  with pytest.raises(ValueError, match=r"strategy 'span' needs `continuation`"):
    dataclasses.replace(config, strategy="span", continuation=None)
  with pytest.raises(ValueError, match=r"span_geometric_p=0.0 must be in \(0, 1\]"):
    dataclasses.replace(config, strategy="span", span_geometric_p=0.0)


def test_word_with_continuation_after_special_starts_a_word(tokenizer):
  special = tokenizer.special_ids
  continuation = tokenizer.is_continuation()
  piece = int(np.flatnonzero(continuation)[0])
  ids = tf.constant([special.cls, piece, 200, piece, special.sep, special.pad], tf.int32)
  word, word_length, num_words = mask_positions.word_structure(
    ids, masking.maskable_positions(ids, special), tf.constant(continuation)
  )
  np.testing.assert_array_equal(word.numpy(), [6, 0, 1, 1, 6, 6])
  np.testing.assert_array_equal(word_length.numpy(), [1, 2, 0, 0, 0, 0])
  assert int(num_words) == 2
