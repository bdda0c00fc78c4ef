"""ALBERT's n-gram masking over 3,000 real sequences: 1/n lengths, whole words, the budget."""

import numpy as np
import pytest

from bert_jax.data import mask_positions, masking
from tests import test_data_word_masking as word_masking

tf = masking.tf
NUM_SEQUENCES = 3000


@pytest.fixture(scope="module")
def sequences(tokenizer):
  return word_masking.helpers.real_sentence_pairs(
    tokenizer, count=NUM_SEQUENCES, max_seq_length=word_masking.SEQ_LEN, short_seq_prob=0.0
  )


tokenizer = word_masking.tokenizer  # The module-scoped WordPiece fixture.


def test_ngram_lengths_follow_one_over_n(tokenizer, sequences):
  config = word_masking.make_config(tokenizer, "ngram")
  probabilities = mask_positions.ngram_length_probabilities()
  np.testing.assert_allclose(probabilities, np.array([6, 3, 2]) / 11)
  special = config.special_ids

  def draws(ids, seed):
    ids = tf.cast(ids, tf.int32)
    position_seed = tf.unstack(tf.random.experimental.stateless_split(seed, num=2))[0]
    chosen, lengths, used = mask_positions.span_choice(
      ids, masking.maskable_positions(ids, special), position_seed, config, probabilities
    )
    return {"chosen": chosen, "lengths": lengths, "used": used}

  result = word_masking.run_rows(draws, sequences)
  used = np.arange(word_masking.MAX_PREDICTIONS)[None, :] < result["used"][:, None]
  lengths = result["lengths"][used]
  assert len(lengths) > 15_000 and lengths.max() == 3
  # Every drawn n-gram up to the one that ends a choice (Wald): the histogram is P(n).
  histogram = np.bincount(lengths, minlength=4)[1:] / len(lengths)
  np.testing.assert_allclose(histogram, probabilities, atol=0.015)

  # The pipeline's masking picks exactly those positions: whole words, within the budget.
  masked = word_masking.run_rows(
    lambda ids, seed: masking.mask_example(ids, seed, config), sequences
  )
  chosen = word_masking.chosen_matrix(masked, sequences.shape)
  np.testing.assert_array_equal(chosen, result["chosen"])
  maskable = masking.maskable_positions(sequences, special)
  assert not np.any(chosen & ~maskable)
  rate = chosen.sum() / maskable.sum()
  assert 0.14 < rate <= 0.15, rate
  continuation = tokenizer.is_continuation()
  split_words = 0
  for row in range(0, NUM_SEQUENCES, 3):
    for start, end in word_masking.words_of(sequences[row], maskable[row], continuation):
      split_words += chosen[row, start:end].any() and not chosen[row, start:end].all()
  assert split_words == 0
