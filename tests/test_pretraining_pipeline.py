"""Pretraining input pipeline: determinism, exact resume, host sharding, eval split, bad input."""

import dataclasses
import gzip
import logging

import numpy as np
import pytest

from bert_jax.data import default_corpus, pretraining_config, pretraining_pipeline, text_corpus

SEQ_LEN = 32
MAX_PREDICTIONS = 5
CONFIG = pretraining_config.PretrainingDataConfig(
  max_seq_length=SEQ_LEN, max_predictions_per_seq=MAX_PREDICTIONS
)
KEYS = (
  "input_ids",
  "token_type_ids",
  "input_mask",
  "masked_lm_positions",
  "masked_lm_ids",
  "masked_lm_weights",
  "next_sentence_labels",
)


@pytest.fixture(scope="module")
def data():
  """The embedded corpus, tokenised once for the module."""
  return pretraining_pipeline.PretrainingData(CONFIG, model_vocab_size=8192)


@pytest.fixture(scope="module")
def small_corpus_path(tmp_path_factory):
  """10 short documents of real text: epochs of a few dozen examples."""
  documents = text_corpus.read_documents(default_corpus.default_corpus_path())[:10]
  path = tmp_path_factory.mktemp("small") / "small.txt"
  path.write_text("\n\n".join("\n".join(d[:12]) for d in documents) + "\n", encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def small_data(small_corpus_path):
  return pretraining_pipeline.PretrainingData(
    dataclasses.replace(CONFIG, corpus_paths=(small_corpus_path,), eval_fraction=0.2)
  )


def take(iterator, count):
  return [next(iterator) for _ in range(count)]


def assert_same_batches(left, right):
  assert len(left) == len(right)
  for a, b in zip(left, right):
    assert set(a) == set(b) == set(KEYS)
    for key in KEYS:
      np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_batch_layout_and_position(data):
  iterator = data.batches(
    split="train", seed=0, global_batch_size=16, process_index=1, process_count=2, start_position=32
  )
  assert iterator.position == 32 and iterator.num_batches is None
  batch = next(iterator)
  assert iterator.position == 48
  for key in ("input_ids", "token_type_ids", "input_mask"):
    assert batch[key].shape == (8, SEQ_LEN) and batch[key].dtype == np.int32
  for key in ("masked_lm_positions", "masked_lm_ids"):
    assert batch[key].shape == (8, MAX_PREDICTIONS) and batch[key].dtype == np.int32
  assert batch["masked_lm_weights"].dtype == np.float32
  assert batch["next_sentence_labels"].shape == (8,)
  assert batch["next_sentence_labels"].dtype == np.int32


def test_batches_are_masked_sentence_pairs(data):
  seed, batch_size = 3, 64
  batches = take(data.batches(split="train", seed=seed, global_batch_size=batch_size), 3)
  unmasked = data.train_examples(seed).examples(np.arange(3 * batch_size))
  got = {key: np.concatenate([b[key] for b in batches]) for key in KEYS}
  for key in ("token_type_ids", "input_mask", "next_sentence_labels"):
    np.testing.assert_array_equal(got[key], unmasked[key])
  real = got["masked_lm_weights"] > 0
  rows = np.repeat(np.arange(len(real)), MAX_PREDICTIONS).reshape(real.shape)
  chosen = np.zeros(got["input_ids"].shape, bool)
  chosen[rows[real], got["masked_lm_positions"][real]] = True
  np.testing.assert_array_equal(got["input_ids"][~chosen], unmasked["input_ids"][~chosen])
  np.testing.assert_array_equal(
    got["masked_lm_ids"][real],
    np.take_along_axis(unmasked["input_ids"], got["masked_lm_positions"], 1)[real],
  )
  assert (got["input_ids"][chosen] == data.tokenizer.special_ids.mask).mean() > 0.6
  assert 0.3 < got["next_sentence_labels"].mean() < 0.7


def test_electra_masking_shows_mask_or_the_original_never_a_random_token(small_corpus_path):
  config = dataclasses.replace(
    CONFIG,
    corpus_paths=(small_corpus_path,),
    eval_fraction=0.2,
    mask_token_prob=0.85,
    random_token_prob=0.0,
  )
  data = pretraining_pipeline.PretrainingData(config)
  batches = take(data.batches(split="train", seed=4, global_batch_size=64), 4)
  unmasked = data.train_examples(4).examples(np.arange(4 * 64))["input_ids"]
  got = {key: np.concatenate([b[key] for b in batches]) for key in KEYS}
  real = got["masked_lm_weights"] > 0
  shown = np.take_along_axis(got["input_ids"], got["masked_lm_positions"], 1)[real]
  original = np.take_along_axis(unmasked, got["masked_lm_positions"], 1)[real]
  is_mask = shown == data.tokenizer.special_ids.mask
  assert real.sum() > 1000 and np.all(is_mask | (shown == original))
  assert abs(is_mask.mean() - 0.85) < 0.03  # BERT's 0.8 is outside; ELECTRA's 15% stay.


def test_deterministic_for_a_seed(data):
  def first_batches(seed):
    return take(data.batches(split="train", seed=seed, global_batch_size=8), 3)

  assert_same_batches(first_batches(1), first_batches(1))
  assert not np.array_equal(first_batches(2)[0]["input_ids"], first_batches(1)[0]["input_ids"])


def test_exact_resume_mid_epoch(data):
  batch_size = 8
  uninterrupted = data.batches(split="train", seed=5, global_batch_size=batch_size)
  run = take(uninterrupted, 12)
  resumed = data.batches(
    split="train", seed=5, global_batch_size=batch_size, start_position=7 * batch_size
  )
  assert_same_batches(take(resumed, 5), run[7:12])
  assert resumed.position == uninterrupted.position == 12 * batch_size


def test_exact_resume_across_epochs(small_data):
  batch_size, seed = 12, 9
  epoch_size = small_data.train_examples(seed).epoch_size
  assert 20 < epoch_size < 200 and epoch_size % batch_size  # A batch straddles each boundary.
  num_steps = 2 * epoch_size // batch_size + 3
  run = take(small_data.batches(split="train", seed=seed, global_batch_size=batch_size), num_steps)
  for step in (epoch_size // batch_size - 1, 2 * epoch_size // batch_size):
    resumed = small_data.batches(
      split="train", seed=seed, global_batch_size=batch_size, start_position=step * batch_size
    )
    assert_same_batches(take(resumed, 3), run[step : step + 3])
  # Later epochs are re-paired and re-shuffled, not a replay of epoch 0.
  examples = small_data.train_examples(seed)
  epoch_0 = examples.examples(np.arange(epoch_size))["input_ids"]
  epoch_1 = examples.examples(np.arange(epoch_size, 2 * epoch_size))["input_ids"]
  assert not np.array_equal(epoch_0, epoch_1)
  assert len({r.tobytes() for r in epoch_0} & {r.tobytes() for r in epoch_1}) < epoch_size


@pytest.mark.parametrize("process_count", [2, 4])
def test_host_shards_concatenate_to_the_global_batch(data, process_count):
  batch_size, start = 8, 40
  single = take(
    data.batches(split="train", seed=4, global_batch_size=batch_size, start_position=start), 3
  )
  hosts = [
    data.batches(
      split="train",
      seed=4,
      global_batch_size=batch_size,
      process_index=p,
      process_count=process_count,
      start_position=start,
    )
    for p in range(process_count)
  ]
  shards = [take(h, 3) for h in hosts]
  for step in range(3):
    joined = {
      key: np.concatenate([shards[p][step][key] for p in range(process_count)]) for key in KEYS
    }
    assert_same_batches([joined], [single[step]])
    rows = [{r.tobytes() for r in shards[p][step]["input_ids"]} for p in range(process_count)]
    assert sum(len(r) for r in rows) == len(set().union(*rows)) == batch_size  # Disjoint.
  assert {h.position for h in hosts} == {start + 3 * batch_size}


def test_eval_split_is_finite_fixed_and_held_out(data):
  batch_size = 8
  first = data.batches(split="eval", seed=0, global_batch_size=batch_size)
  expected_batches = data.eval_examples().num_examples // batch_size
  assert first.num_batches == expected_batches > 10
  first = list(first)
  second = list(data.batches(split="eval", seed=123, global_batch_size=batch_size))
  assert len(first) == expected_batches
  assert_same_batches(first, second)
  halves = [
    list(
      data.batches(
        split="eval", seed=0, global_batch_size=batch_size, process_index=p, process_count=2
      )
    )
    for p in (0, 1)
  ]
  joined = [{key: np.concatenate([a[key], b[key]]) for key in KEYS} for a, b in zip(*halves)]
  assert_same_batches(joined, first)
  # Held-out documents never appear in training.
  train = data.train_corpus
  held_out = data.eval_corpus
  train_docs = {train.document(d)[0].tobytes() for d in range(train.num_documents)}
  assert held_out.num_documents >= 2
  assert not any(
    held_out.document(d)[0].tobytes() in train_docs for d in range(held_out.num_documents)
  )


def test_eval_size_option_and_errors(small_corpus_path, caplog):
  config = dataclasses.replace(
    CONFIG, corpus_paths=(small_corpus_path,), eval_fraction=0.2, num_eval_examples=16
  )
  small = pretraining_pipeline.PretrainingData(config)
  assert len(list(small.batches(split="eval", seed=0, global_batch_size=8))) == 2
  with pytest.raises(ValueError, match=r"fewer than one global batch of 32"):
    small.batches(split="eval", seed=0, global_batch_size=32)
  # num_eval_examples is a cap: more than the held-out documents give means all of them.
  capped = pretraining_pipeline.PretrainingData(
    dataclasses.replace(config, num_eval_examples=10_000)
  )
  with caplog.at_level(logging.WARNING):
    num_available = capped.eval_examples().num_examples
  assert "num_eval_examples is 10000 but the 2 held-out documents give only" in caplog.text
  assert 16 < num_available < 10_000
  no_eval = pretraining_pipeline.PretrainingData(dataclasses.replace(config, eval_fraction=0.0))
  with pytest.raises(ValueError, match=r"eval split is empty because data.eval_fraction is 0"):
    no_eval.batches(split="eval", seed=0, global_batch_size=8)


def test_bad_batch_arguments(data):
  with pytest.raises(
    ValueError,
    match=r"global_batch_size 10 is not a positive multiple of "
    r"process_count 4",
  ):
    data.batches(split="train", seed=0, global_batch_size=10, process_count=4)
  with pytest.raises(ValueError, match=r"process_index 2 is not in \[0, 2\)"):
    data.batches(split="train", seed=0, global_batch_size=8, process_index=2, process_count=2)
  with pytest.raises(ValueError, match=r"split is 'test'"):
    data.batches(split="test", seed=0, global_batch_size=8)


def test_bad_config_values():
  with pytest.raises(ValueError, match=r"max_seq_length is 4; a sentence pair needs at least 5"):
    pretraining_config.PretrainingDataConfig(max_seq_length=4)
  with pytest.raises(
    ValueError,
    match=r"max_predictions_per_seq is 40; it must be in \[1, "
    r"max_seq_length=32\]",
  ):
    pretraining_config.PretrainingDataConfig(max_seq_length=32, max_predictions_per_seq=40)
  with pytest.raises(
    ValueError,
    match=r"data.masking is 'spans'; choose one of \['ngram', 'span', "
    r"'token', 'whole_word'\]",
  ):
    pretraining_config.PretrainingDataConfig(masking="spans")
  with pytest.raises(ValueError, match=r"data.mask_token_prob=0.9 and data.random_token_prob=0.2"):
    pretraining_config.PretrainingDataConfig(mask_token_prob=0.9, random_token_prob=0.2)
  with pytest.raises(ValueError, match=r"eval_fraction is 1.0"):
    pretraining_config.PretrainingDataConfig(eval_fraction=1.0)


def test_bad_files(tmp_path, small_corpus_path):
  missing = str(tmp_path / "missing.txt")
  with pytest.raises(FileNotFoundError, match=r"corpus file .*missing.txt does not exist"):
    pretraining_pipeline.PretrainingData(
      dataclasses.replace(CONFIG, corpus_paths=(small_corpus_path, missing))
    )
  with pytest.raises(FileNotFoundError, match=r"corpus pattern .*\*.none matches no files"):
    pretraining_pipeline.PretrainingData(
      dataclasses.replace(CONFIG, corpus_paths=(str(tmp_path / "*.none"),))
    )
  with pytest.raises(FileNotFoundError, match=r"vocab file .*missing_vocab.txt does not exist"):
    pretraining_pipeline.PretrainingData(
      dataclasses.replace(CONFIG, vocab_path=str(tmp_path / "missing_vocab.txt"))
    )
  no_mask = tmp_path / "no_mask_vocab.txt"
  with open(default_corpus.default_vocab_path(), encoding="utf-8") as f:
    no_mask.write_text("".join(line for line in f if line != "[MASK]\n"), encoding="utf-8")
  with pytest.raises(ValueError, match=r"lacks \[MASK\]"):
    pretraining_pipeline.PretrainingData(dataclasses.replace(CONFIG, vocab_path=str(no_mask)))
  with pytest.raises(
    ValueError,
    match=r"vocab .*vocab.txt has 8192 entries but "
    r"model.vocab_size is 30522; set model.vocab_size=8192",
  ):
    pretraining_pipeline.PretrainingData(CONFIG, model_vocab_size=30522)
  empty = tmp_path / "empty.txt"
  empty.write_text("\n\n  \n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"corpus file .*empty.txt contains no text"):
    text_corpus.read_documents([str(empty)])


def test_non_utf8_lines_are_skipped_counted_and_logged(tmp_path, caplog):
  path = tmp_path / "mixed.txt"
  path.write_bytes(
    b"First sentence of doc one.\n\xff\xfe broken line\nSecond sentence.\n\n"
    b"Doc two \xc3\x28 is broken here.\nDoc two, good line.\n"
  )
  documents, skipped = text_corpus.read_documents_from_file(str(path))
  assert skipped == 2
  assert documents == [["First sentence of doc one.", "Second sentence."], ["Doc two, good line."]]
  with caplog.at_level(logging.WARNING):
    assert text_corpus.read_documents([str(path)]) == documents
  assert "skipped 2 lines of" in caplog.text and "not valid UTF-8" in caplog.text
  gz_path = tmp_path / "mixed.txt.gz"
  with gzip.open(gz_path, "wb") as f:
    f.write(path.read_bytes())
  assert text_corpus.read_documents([str(gz_path)]) == documents
