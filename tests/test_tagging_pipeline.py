"""Token classification through the pipeline: TFDS conll2003, the task's data object (every
eval word scored), the NER config, and fine-tuning through the train loop."""

import importlib.util
import pathlib

import numpy as np
import pytest

from bert_jax.data import default_corpus, tokenization
from bert_jax.errors import UserInputError
from bert_jax.tasks import finetune_config
from bert_jax.tasks.tagging import data as conll_data
from bert_jax.tasks.tagging import reader as conll
from bert_jax.train import settings
from bert_jax.train.loop import train_and_evaluate
from tests import finetune_fixtures, helpers
from tests.test_tagging import CONLL_TEXT, corpus_sentences, write


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.load_wordpiece(default_corpus.default_vocab_path())


def _conll_columns(text_path):
  """Every column of a 4-column CoNLL file, as TFDS conll2003 examples."""
  columns = [conll.read_conll(text_path, label_column=c) for c in (1, 2, 3)]
  return [
    {
      "tokens": list(pos.words),
      "pos": list(pos.labels),
      "chunks": list(chunks.labels),
      "ner": list(ner.labels),
    }
    for pos, chunks, ner in zip(*columns)
  ]


@pytest.fixture(scope="module")
def conll2003_tfds(tmp_path_factory):
  """A TFDS data dir holding a prepared ``conll2003`` (written offline by TFDS's own writer)
  whose train and dev splits are the CoNLL text's sentences; returns (data dir, text path)."""
  tfds = pytest.importorskip("tensorflow_datasets")
  from tensorflow_datasets.core.dataset_builders.conll import conll_dataset_builder_utils  # pylint: disable=g-import-not-at-top

  directory = tmp_path_factory.mktemp("conll2003")
  path = write(directory, CONLL_TEXT)
  examples = list(enumerate(_conll_columns(path)))
  tfds.dataset_builders.store_as_tfds_dataset(
    name="conll2003",
    version="1.0.0",
    config="conll2003",
    features=conll_dataset_builder_utils.CONLL_2003_CONFIG.features_dict,
    split_datasets={"train": examples, "dev": examples},
    data_dir=str(directory / "tfds"),
    disable_shuffling=True,
  )
  return str(directory / "tfds"), path


def test_tfds_conll2003_reads_like_the_conll_file(conll2003_tfds):
  data_dir, path = conll2003_tfds
  for column in (-1, 1, 2):
    sentences, names = conll.read_tfds(
      "conll2003", split="dev", label_column=column, data_dir=data_dir
    )
    assert sentences == conll.read_conll(path, label_column=column), column
  assert names[:3] == ("O", "B-ADJP", "I-ADJP") and len(names) == 23  # CoNLL chunk tags.
  _, names = conll.read_tfds("conll2003", split="train", data_dir=data_dir)
  assert names == ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
  with pytest.raises(UserInputError, match=r"has no split 'validation'; use one of \['dev'"):
    conll.read_tfds("conll2003", split="validation", data_dir=data_dir)


def test_unprepared_tfds_conll2003_names_the_build_command(tmp_path):
  pytest.importorskip("tensorflow_datasets")
  with pytest.raises(UserInputError, match=f"`tfds build conll2003 --data_dir={tmp_path}`"):
    conll.read_tfds("conll2003", split="train", data_dir=str(tmp_path))


def _data_config(**values):
  return finetune_config.FinetuneDataConfig(**values)


def test_tagging_data_scores_every_eval_word(tmp_path, tokenizer, conll2003_tfds):
  """Eval metrics of predictions read straight from the features: all words right -> F1 1."""
  sentences = corpus_sentences(40, min_words=30)
  text = "\n\n".join("\n".join(f"{w} {t}" for w, t in zip(s.words, s.labels)) for s in sentences)
  train, evaluation = write(tmp_path, text, "train.txt"), write(tmp_path, text, "eval.txt")
  data = conll_data.make_data(
    _data_config(train_path=train, eval_path=evaluation, max_seq_length=16, doc_stride=6), tokenizer
  )
  assert data.label_names == ("O", "B-CAP")
  assert data.num_eval_examples > 3 * len(sentences)  # Windows.
  rows = [b for b in data.batches("eval", 0, 32, 0, 1)]
  predicted = np.concatenate([b["label_ids"] for b in rows])[
    np.concatenate([b["row_id"] for b in rows]) >= 0
  ]
  assert data.eval_metrics({"label_ids": predicted}) == {
    "accuracy": 1.0,
    "precision": 1.0,
    "recall": 1.0,
    "f1": 1.0,
  }
  words = [label for s in sentences for label in s.labels]
  assert data.eval_metrics({"label_ids": np.zeros_like(predicted)}) == {
    "accuracy": words.count("O") / len(words),
    "precision": 0.0,
    "recall": 0.0,
    "f1": 0.0,
  }
  # Labels the train file lacks must be listed; TFDS brings its full tag set.
  with pytest.raises(UserInputError, match=r"eval labels \['B-LOC', 'B-MISC'"):
    conll_data.make_data(
      _data_config(train_path=train, eval_path=write(tmp_path, CONLL_TEXT)), tokenizer
    )
  data_dir, _ = conll2003_tfds
  from_tfds = conll_data.make_data(
    _data_config(tfds_name="conll2003", tfds_data_dir=data_dir, tfds_eval_split="dev"), tokenizer
  )
  assert len(from_tfds.label_names) == 9 and from_tfds.eval_sentences[0].words[0] == "EU"


def load_config(name, overrides):
  """``configs/finetune/<name>.py`` with dotted-key ``overrides``."""
  path = pathlib.Path(__file__).resolve().parents[1] / "configs" / "finetune" / f"{name}.py"
  spec = importlib.util.spec_from_file_location(f"{name}_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return finetune_fixtures.set_keys(module.get_config(None), overrides)


def test_ner_config_carries_the_recipe():
  run = settings.settings_from_config(load_config("ner", {"data.tfds_name": "conll2003"}))
  assert run.trainer.task == "tagging"
  assert (
    run.trainer.global_batch_size,
    run.optimizer.learning_rate,
    run.trainer.num_train_epochs,
    run.data.max_seq_length,
  ) == (32, 5e-5, 3.0, 128)
  assert (
    run.data.tfds_eval_split,
    run.data.conll_label_column,
    run.data.lowercase,
    run.model.vocab_size,
  ) == ("dev", -1, False, 28996)


def test_malformed_conll_stops_the_run_before_training(tmp_path):
  bad = write(tmp_path, CONLL_TEXT.replace("call NN I-NP O", "call NN O"), "train.txt")
  config = load_config(
    "ner",
    dict(
      finetune_fixtures.model_overrides(),
      **{"data.train_path": bad, "data.eval_path": bad, "data.lowercase": True},
    ),
  )
  with pytest.raises(UserInputError, match=f"^{bad}:6: 3 columns where the file's first token"):
    train_and_evaluate(config, str(tmp_path / "run"), helpers.one_device())
  assert not (tmp_path / "run" / "checkpoints").exists()


def test_fine_tuning_on_windowed_sentences_scores_each_word_once(
  tiny_pretrained_workdir, tokenizer, tmp_path
):
  """The NER config through the train loop, with sentences split into 16-token windows: eval
  maps the predictions back to every word once, and the tiny model learns the fixture's tags."""
  train, dev = finetune_fixtures.write_conll_files(tmp_path)
  eval_pieces = [sum(len(tokenizer.encode(w)) for w in s.words) for s in conll.read_conll(dev)]
  assert sum(n > 14 for n in eval_pieces) > len(eval_pieces) // 2  # Most need 2+ windows.
  steps = 30
  config = load_config(
    "ner",
    dict(
      finetune_fixtures.model_overrides(),
      **finetune_fixtures.short_run(tiny_pretrained_workdir, train, dev, steps),
      **{
        "data.lowercase": True,
        "data.max_seq_length": 16,
        "data.doc_stride": 8,
        "optimizer.learning_rate": 1e-3,
      },
    ),
  )
  metrics = train_and_evaluate(config, str(tmp_path / "run"), helpers.one_device())
  # Word accuracy after mapping windows back to words equals the accuracy over the scored
  # first sub-words the eval step summed: each word was scored exactly once.
  assert metrics["accuracy"] == pytest.approx(metrics["token_accuracy"], abs=1e-9)
  assert metrics["f1"] > 0.8, metrics  # Entity F1; predicting all O scores 0.
