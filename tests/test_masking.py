"""Dynamic MLM masking: BERT's rates over 10,000 real sequences, invariants, determinism."""

import numpy as np
import pytest

from bert_jax.data import default_corpus, masking, tokenization
from tests import helpers

tf = masking.tf

SEQ_LEN = 128
MAX_PREDICTIONS = 20
NUM_SEQUENCES = 10_000


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.load_wordpiece(default_corpus.default_vocab_path())


@pytest.fixture(scope="module")
def config(tokenizer):
  return masking.MaskingConfig(
    max_predictions_per_seq=MAX_PREDICTIONS,
    mask_prob=0.15,
    vocab_size=tokenizer.vocab_size,
    special_ids=tokenizer.special_ids,
    random_token_low=tokenizer.first_regular_id,
  )


@pytest.fixture(scope="module")
def sequences(tokenizer):
  """10,000 real [CLS] A [SEP] B [SEP] sequences of varied length from the embedded corpus."""
  return helpers.real_sentence_pairs(
    tokenizer, count=NUM_SEQUENCES, max_seq_length=SEQ_LEN, short_seq_prob=0.3
  )


def mask_all(input_ids, config, seed=7):
  """Masks rows through tf.data exactly as the pipeline does (seed = [seed, row index])."""
  dataset = tf.data.Dataset.from_tensor_slices(
    (input_ids, np.arange(len(input_ids), dtype=np.int64))
  )
  dataset = dataset.map(
    lambda ids, i: masking.mask_example(ids, tf.stack([tf.constant(seed, tf.int64), i]), config),
    num_parallel_calls=tf.data.AUTOTUNE,
    deterministic=True,
  ).batch(2048)
  batches = list(dataset.as_numpy_iterator())
  return {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}


@pytest.fixture(scope="module")
def masked(sequences, config):
  return mask_all(sequences, config)


def maskable(input_ids, special_ids):
  return (
    (input_ids != special_ids.cls) & (input_ids != special_ids.sep) & (input_ids != special_ids.pad)
  )


def test_predicts_fifteen_percent_of_maskable_tokens(sequences, masked, tokenizer):
  assert len(sequences) == NUM_SEQUENCES
  num_maskable = maskable(sequences, tokenizer.special_ids).sum(axis=1)
  assert num_maskable.min() < 40 < SEQ_LEN - 10 < num_maskable.max()  # Varied lengths.
  num_chosen = masked["masked_lm_weights"].sum(axis=1)
  # Exactly BERT's count per sequence (Python's round: half to even).
  expected = [min(MAX_PREDICTIONS, max(1, round(n * 0.15))) for n in num_maskable.tolist()]
  np.testing.assert_array_equal(num_chosen, expected)
  assert abs(num_chosen.sum() / num_maskable.sum() - 0.15) < 0.005


def test_replacement_is_80_10_10(sequences, masked, tokenizer):
  real = masked["masked_lm_weights"] > 0
  positions = masked["masked_lm_positions"]
  original = np.take_along_axis(sequences, positions, axis=1)[real]
  new = np.take_along_axis(masked["input_ids"], positions, axis=1)[real]
  assert real.sum() > 150_000
  is_mask = new == tokenizer.special_ids.mask
  unchanged = new == original
  is_random = ~is_mask & ~unchanged
  assert abs(is_mask.mean() - 0.8) < 0.01
  assert abs(unchanged.mean() - 0.1) < 0.01
  assert abs(is_random.mean() - 0.1) < 0.01
  # Random replacements are ordinary tokens, spread over the whole ordinary range.
  random_ids = new[is_random]
  assert random_ids.min() >= tokenizer.first_regular_id
  assert random_ids.max() < tokenizer.vocab_size
  midpoint = (tokenizer.first_regular_id + tokenizer.vocab_size - 1) / 2
  assert abs(random_ids.mean() - midpoint) < 0.02 * tokenizer.vocab_size


def test_layout_and_invariants(sequences, masked, tokenizer):
  special = tokenizer.special_ids
  weights = masked["masked_lm_weights"]
  positions = masked["masked_lm_positions"]
  real = weights > 0
  assert masked["input_ids"].dtype == np.int32 and positions.dtype == np.int32
  assert masked["masked_lm_ids"].dtype == np.int32 and weights.dtype == np.float32
  assert set(np.unique(weights)) <= {0.0, 1.0}
  # Real slots come first, in increasing position order; padding slots are all zero.
  assert np.all(np.diff(real.astype(int), axis=1) <= 0)
  assert np.all((np.diff(positions, axis=1) > 0) | ~real[:, 1:])
  assert np.all(positions[~real] == 0) and np.all(masked["masked_lm_ids"][~real] == 0)
  # Chosen positions are never [CLS], [SEP] or padding; labels are the original ids.
  original = np.take_along_axis(sequences, positions, axis=1)
  assert np.all(maskable(original, special)[real])
  np.testing.assert_array_equal(masked["masked_lm_ids"][real], original[real])
  # Nothing else changes: specials, padding and unchosen tokens stay as they were.
  chosen = np.zeros(sequences.shape, bool)
  rows = np.repeat(np.arange(len(sequences)), MAX_PREDICTIONS).reshape(positions.shape)
  chosen[rows[real], positions[real]] = True
  np.testing.assert_array_equal(masked["input_ids"][~chosen], sequences[~chosen])


def test_positions_are_uniform_over_maskable_tokens(config, tokenizer):
  # 4,000 copies of one sequence with 40 maskable tokens, different seeds: each position is
  # chosen with probability 6/40.
  special = tokenizer.special_ids
  row = np.full(48, special.pad, np.int32)
  row[0], row[21], row[42] = special.cls, special.sep, special.sep
  row[1:21] = np.arange(100, 120)
  row[22:42] = np.arange(200, 220)
  result = mask_all(np.tile(row, (4000, 1)), config, seed=11)
  counts = np.bincount(result["masked_lm_positions"][result["masked_lm_weights"] > 0], minlength=48)
  assert counts[[0, 21, 42]].sum() == 0 and counts[43:].sum() == 0
  maskable_counts = np.concatenate([counts[1:21], counts[22:42]])
  expected = 4000 * 6 / 40
  # Binomial sd is ~22; 5 sd bounds.
  assert np.all(np.abs(maskable_counts - expected) < 5 * np.sqrt(expected * (1 - 6 / 40)))


def test_deterministic_per_example_seed(sequences, masked, config):
  again = mask_all(sequences[:500], config)
  for key in masked:
    np.testing.assert_array_equal(again[key], masked[key][:500])
  # One example masked alone with its seed equals its row in the batch run.
  alone = masking.mask_example(tf.constant(sequences[123]), tf.constant([7, 123], tf.int64), config)
  for key in masked:
    np.testing.assert_array_equal(alone[key].numpy(), masked[key][123])
  other_seed = mask_all(sequences[:500], config, seed=8)
  assert not np.array_equal(other_seed["masked_lm_positions"], masked["masked_lm_positions"][:500])


def test_degenerate_sequences(config, tokenizer):
  special = tokenizer.special_ids
  nothing = np.array([special.cls, special.sep, special.sep] + [special.pad] * 13, np.int32)
  single = np.array([special.cls, 999, special.sep, special.sep] + [special.pad] * 12, np.int32)
  # 16 positions, fewer than the 20 prediction slots.
  result = mask_all(np.stack([nothing, single]), config)
  assert result["masked_lm_weights"].shape == (2, MAX_PREDICTIONS)
  assert result["masked_lm_weights"][0].sum() == 0
  np.testing.assert_array_equal(result["input_ids"][0], nothing)
  assert result["masked_lm_weights"][1].sum() == 1
  assert result["masked_lm_positions"][1, 0] == 1 and result["masked_lm_ids"][1, 0] == 999
  np.testing.assert_array_equal(result["input_ids"][1, 2:], single[2:])


def test_config_errors(tokenizer):
  kwargs = dict(
    max_predictions_per_seq=20,
    mask_prob=0.15,
    vocab_size=tokenizer.vocab_size,
    special_ids=tokenizer.special_ids,
    random_token_low=5,
  )
  with pytest.raises(ValueError, match=r"masking strategy 'bogus' is unknown; choose one of"):
    masking.MaskingConfig(**{**kwargs, "strategy": "bogus"})
  with pytest.raises(ValueError, match="mask_prob is 0.0"):
    masking.MaskingConfig(**{**kwargs, "mask_prob": 0.0})
  with pytest.raises(ValueError, match="random_token_low is 9000"):
    masking.MaskingConfig(**{**kwargs, "random_token_low": 9000})
