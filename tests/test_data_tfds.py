"""The TFDS text source: same batches as the same documents in a text file; clear errors.

The test dataset is made offline with TFDS's own writer, from real sentences of the embedded
corpus, so the source is read exactly as a dataset made by `tfds build` would be.
"""

import pytest

from bert_jax import default_config
from bert_jax.data import (
  default_corpus,
  pretraining_config,
  pretraining_pipeline,
  sentences,
  text_corpus,
)
from bert_jax.errors import UserInputError
from bert_jax.train import settings
from tests import helpers

tfds = pytest.importorskip("tensorflow_datasets")

NAME = "bert_jax_tfds_test_corpus"
NUM_DOCUMENTS = 24


def as_paragraphs(document):
  """The document as two lines of running prose, as a TFDS text feature would hold it."""
  half = len(document) // 2
  return " ".join(document[:half]) + "\n" + " ".join(document[half:])


def splits_back(document):
  text = as_paragraphs(document)
  return [s for line in text.splitlines() for s in sentences.split_sentences(line)] == document


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """``(documents, text file, TFDS data dir)`` holding the same documents."""
  all_documents = text_corpus.read_documents(default_corpus.default_corpus_path())
  # Only documents the paragraph splitter cuts back into their original sentences, so the text
  # file can hold the original sentences and the comparison does not lean on the splitter.
  documents = [d for d in all_documents if len(d) >= 2 and splits_back(d)][:NUM_DOCUMENTS]
  assert len(documents) == NUM_DOCUMENTS
  text_path = tmp_path_factory.mktemp("text") / "corpus.txt"
  text_path.write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
  data_dir = tmp_path_factory.mktemp("tfds")
  examples = [
    (i, {"text": as_paragraphs(d), "title": f"document {i}"}) for i, d in enumerate(documents)
  ]
  # An empty example must be skipped, not become an empty document.
  examples.append((len(examples), {"text": " \n", "title": "empty"}))
  tfds.dataset_builders.store_as_tfds_dataset(
    name=NAME,
    version="1.0.0",
    features=tfds.features.FeaturesDict(
      {"text": tfds.features.Text(), "title": tfds.features.Text()}
    ),
    split_datasets={"train": examples},
    data_dir=str(data_dir),
    disable_shuffling=True,
  )
  return documents, str(text_path), str(data_dir)


def make_data(**overrides):
  config = pretraining_config.PretrainingDataConfig(
    max_seq_length=64, max_predictions_per_seq=10, eval_fraction=0.1, **overrides
  )
  return pretraining_pipeline.PretrainingData(config)


def take(data, count, **kwargs):
  iterator = data.batches(global_batch_size=8, **kwargs)
  return [next(iterator) for _ in range(count)]


def test_tfds_source_gives_the_text_file_batches(corpus):
  _, text_path, data_dir = corpus
  from_tfds = make_data(tfds_name=NAME, tfds_data_dir=data_dir)
  from_text = make_data(corpus_paths=(text_path,))
  assert from_tfds.train_corpus.num_documents == from_text.train_corpus.num_documents
  assert from_tfds.eval_corpus.num_documents == from_text.eval_corpus.num_documents
  helpers.assert_same_batches(
    take(from_tfds, 3, split="train", seed=7), take(from_text, 3, split="train", seed=7)
  )
  # A resumed second host sees the same examples from either source.
  host = dict(split="train", seed=7, process_index=1, process_count=2, start_position=40)
  helpers.assert_same_batches(take(from_tfds, 2, **host), take(from_text, 2, **host))
  helpers.assert_same_batches(
    take(from_tfds, 1, split="eval", seed=0), take(from_text, 1, split="eval", seed=0)
  )


def test_max_documents_and_split_slices_limit_the_documents(corpus):
  documents, _, data_dir = corpus
  for overrides in (dict(tfds_max_documents=10), dict(tfds_split="train[:10]")):
    data = make_data(tfds_name=NAME, tfds_data_dir=data_dir, **overrides)
    num_read = data.train_corpus.num_documents + data.eval_corpus.num_documents
    assert num_read == 10
    assert data.train_corpus.num_sentences + data.eval_corpus.num_sentences == sum(
      len(d) for d in documents[:10]
    )


def assert_one_line_error(match, **overrides):
  with pytest.raises(UserInputError, match=match) as error:
    make_data(**overrides)
  assert "\n" not in str(error.value)
  return str(error.value)


def test_missing_dataset_is_one_line_error_with_the_build_command(corpus, tmp_path):
  empty = str(tmp_path)
  message = assert_one_line_error("not prepared", tfds_name=NAME, tfds_data_dir=empty)
  assert NAME in message and f"tfds build {NAME} --data_dir={empty}" in message
  assert "download_and_prepare" in message and "network" in message
  # A dataset TFDS knows but that was never prepared here must not be downloaded.
  message = assert_one_line_error("not prepared", tfds_name="mnist", tfds_data_dir=empty)
  assert "tfds build mnist" in message


def test_bad_split_key_and_config_are_one_line_errors(corpus):
  _, _, data_dir = corpus
  source = dict(tfds_name=NAME, tfds_data_dir=data_dir)
  assert_one_line_error("no split 'validation'", tfds_split="validation", **source)
  assert_one_line_error("no feature 'body'.*'text', 'title'", tfds_text_key="body", **source)
  assert_one_line_error("tfds_max_documents", tfds_max_documents=-1, **source)
  assert_one_line_error("keep one", tfrecord_pattern="/data/*.tfrecord", **source)


def test_default_config_has_the_tfds_keys():
  config = default_config.base_config()
  config.data.tfds_name = NAME
  config.data.tfds_max_documents = 5
  data = settings.settings_from_config(config).data
  assert (
    data.tfds_name,
    data.tfds_split,
    data.tfds_text_key,
    data.tfds_data_dir,
    data.tfds_max_documents,
  ) == (NAME, "train", "text", "", 5)
