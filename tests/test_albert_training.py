"""ALBERT on the one trainer: pretraining with n-gram masking, SOP and the span boundary
objective learns (SBO loss falls), SOP learns a sentence order the text gives away, and GLUE
fine-tuning starts from its workdir and from converted Hugging Face ALBERT weights."""

import numpy as np
import pytest

from bert_jax.data import default_corpus
from bert_jax.default_config import base_config, finetune_config
from bert_jax.train.loop import train_and_evaluate
from tests import finetune_fixtures, helpers, run_helpers

# ALBERT-tiny's trunk: 2 applications of one shared layer, H=128, E=64, the embedded vocab.
ALBERT_MODEL = {
  "model.family": "albert",
  "model.size": "tiny",
  "model.embedding_size": 64,
  "model.albert.layer_sharing": "all",
  "model.hidden_act": "gelu_new",
  "model.vocab_size": 8192,
  "model.max_position_embeddings": 128,
}
_RUN = {"peak_flops_per_device": 1e12}  # MFU's denominator without measuring the host's peak.


@pytest.fixture(scope="module")
def albert_workdir(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("albert_pretrained")
  steps = 40
  config = finetune_fixtures.set_keys(
    base_config(),
    {
      **ALBERT_MODEL,
      **_RUN,
      "num_train_steps": steps,
      "global_batch_size": 16,
      "log_every_steps": 10,
      "eval_every_steps": steps,
      "checkpoint_every_steps": steps,
      "model.span_boundary.enabled": True,
      "model.hidden_dropout_rate": 0.0,
      "model.attention_dropout_rate": 0.0,
      "data.max_seq_length": 64,
      "data.max_predictions_per_seq": 10,
      "data.num_eval_examples": 16,
      "data.masking": "ngram",
      "data.objective": "sop",
      "optimizer.learning_rate": 1e-3,
      "optimizer.warmup_steps": 4,
    },
  )
  train_and_evaluate(config, str(workdir), helpers.one_device())
  return workdir


def test_pretraining_reports_and_lowers_the_boundary_loss(albert_workdir):
  rows = run_helpers.read_metrics(albert_workdir, "train")
  assert [row["step"] for row in rows] == [10, 20, 30, 40]
  for row in rows:
    assert {"mlm_loss", "sbo_loss", "sbo_accuracy", "sop_loss", "sop_accuracy"} <= row.keys()
    assert "nsp_loss" not in row  # The sentence head's metrics are named after the objective.
    # The total is the sum of its parts: MLM + SBO + SOP.
    np.testing.assert_allclose(
      row["loss"], row["mlm_loss"] + row["sbo_loss"] + row["sop_loss"], rtol=1e-5
    )
  assert rows[-1]["sbo_loss"] < rows[0]["sbo_loss"] - 0.3, [r["sbo_loss"] for r in rows]
  assert rows[-1]["mlm_loss"] < rows[0]["mlm_loss"] - 0.3


# Sentence k of every document starts with the k-th ordinal: the order is written in the text.
_ORDINALS = ("first", "second", "third", "fourth")
_FILLER = ("city", "river", "music", "house", "people", "school", "war", "film", "game")


def _ordinal_corpus(path, num_documents=600):
  rng = np.random.default_rng(0)
  lines = []
  for _ in range(num_documents):
    lines += [f"{word} {' '.join(rng.choice(_FILLER, 5))} ." for word in _ORDINALS] + [""]
  path.write_text("\n".join(lines), encoding="utf-8")
  return path


@pytest.mark.optimized_xla
def test_sop_learns_a_sentence_order_the_text_gives_away(tmp_path):
  """The pipeline's SOP labels, the sentence head on the pooled [CLS] and the eval metric agree.

  A label that does not follow the swap, a head that cannot see the segments, or an eval that
  does not score what was trained keeps this at chance. The embedded corpus cannot show it in
  minutes: its 97 documents are too few for the order of two held-out Wikipedia segments to be
  learned (training pairs' order is memorised, held-out accuracy stays near 0.5).
  """
  config = finetune_fixtures.set_keys(
    base_config(),
    {
      **ALBERT_MODEL,
      **_RUN,
      "num_train_steps": 250,
      "global_batch_size": 32,
      "log_every_steps": 250,
      "eval_every_steps": 250,
      "checkpoint_every_steps": 250,
      "model.hidden_dropout_rate": 0.0,
      "model.attention_dropout_rate": 0.0,
      "data.corpus_paths": (str(_ordinal_corpus(tmp_path / "ordinals.txt")),),
      "data.eval_fraction": 0.3,  # 180 held-out documents, one pair each.
      "data.max_seq_length": 32,  # A whole document is one chunk, split into A and B.
      "data.max_predictions_per_seq": 5,
      "data.masking": "ngram",
      "data.objective": "sop",
      "optimizer.name": "lamb",
      "optimizer.learning_rate": 5e-3,  # configs/albert_tiny.py's.
      "optimizer.warmup_steps": 25,
    },
  )
  metrics = train_and_evaluate(config, str(tmp_path / "run"), helpers.one_device())
  # 160 eval pairs (whole batches): chance is 0.5 with a standard deviation of 0.04. Measured
  # 0.887; with labels that do not follow the swap (segments left in order) 0.556.
  assert metrics["sop_accuracy"] > 0.75, metrics


def _classification(files, init_from, steps=40):
  values = {
    **ALBERT_MODEL,
    **_RUN,
    **finetune_fixtures.short_run(init_from, files[0], files[1], steps),
    "global_batch_size": 32,
    "data.glue_task": "mrpc",
    "data.max_seq_length": 64,
    "optimizer.learning_rate": 1e-3,
    # The worker's compilation cache (tests/conftest.py), not the workdir's: both fine-tuning
    # tests compile the same train and eval steps, the second loads them.
    "compilation_cache_dir": "",
  }
  return finetune_fixtures.set_keys(finetune_config("classification"), values)


@pytest.fixture(scope="module")
def mrpc_files(tmp_path_factory):
  return finetune_fixtures.write_mrpc_files(tmp_path_factory.mktemp("mrpc"))


@pytest.mark.optimized_xla
def test_glue_fine_tuning_from_the_albert_workdir(albert_workdir, mrpc_files, tmp_path):
  metrics = train_and_evaluate(
    _classification(mrpc_files, albert_workdir), str(tmp_path), helpers.one_device()
  )
  assert metrics["accuracy"] > 0.75 and metrics["f1"] > 0.75, metrics  # Chance: 0.5.


@pytest.mark.optimized_xla
def test_glue_fine_tuning_from_converted_hugging_face_albert(mrpc_files, tmp_path):
  transformers = pytest.importorskip("transformers")
  torch = pytest.importorskip("torch")
  from bert_jax.tools import convert  # pylint: disable=g-import-not-at-top
  from tests import hf_reference  # pylint: disable=g-import-not-at-top

  model = hf_reference.random_albert(
    transformers,
    torch,
    vocab_size=8192,
    embedding_size=64,
    hidden_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=512,
    max_position_embeddings=128,
  )
  model.save_pretrained(tmp_path / "hf")
  convert.from_hf(
    str(tmp_path / "hf"), str(tmp_path / "converted"), vocab=default_corpus.default_vocab_path()
  )
  metrics = train_and_evaluate(
    _classification(mrpc_files, tmp_path / "converted"), str(tmp_path / "run"), helpers.one_device()
  )
  assert metrics["accuracy"] > 0.75 and metrics["f1"] > 0.75, metrics
