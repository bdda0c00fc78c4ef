"""SQuAD end to end: fine-tuning the tiny pretrained model (BERT, and XLNet from its own
pretraining workdir) on a small learnable SQuAD fixture.

The fixture (`write_squad_files`) is built from the embedded Wikipedia sample: each context is
three consecutive sentences of one article holding exactly one year; the question names the
sentence the year stands in ("In what year <its first words>?") and the answer is the year.
SQuAD 2.0 adds the same kind of question about paragraphs without any year: unanswerable. The
year being the only one in its context, a tiny model learns to find it within a minute on a
CPU; answers that need question-context word matching took far more steps than a test affords.
"""

import importlib.util
import json
import pathlib
import re

import numpy as np
import pytest

from bert_jax.data import default_corpus
from bert_jax.errors import UserInputError
from bert_jax.tasks.span_qa import metrics as squad_metrics
from bert_jax.train import settings
from bert_jax.train.loop import train_and_evaluate
from tests import finetune_fixtures, helpers, run_helpers

_REPO = pathlib.Path(__file__).resolve().parents[1]

_YEAR = re.compile(r"\b(?:1[0-9]{3}|20[0-9]{2})\b")
_WORD = re.compile(r"[^\W\d_]+")


def _paragraphs(sentences_per_paragraph=3, min_chars=150, max_chars=420):
  """Contexts of consecutive sentences of one article, in corpus order."""
  text = pathlib.Path(default_corpus.default_corpus_path()).read_text(encoding="utf-8")
  # One sentence per line, a blank line between articles (read directly: no TensorFlow).
  for document in (block.strip().splitlines() for block in text.split("\n\n")):
    for first in range(0, len(document) - sentences_per_paragraph + 1, sentences_per_paragraph):
      context = " ".join(document[first : first + sentences_per_paragraph])
      if min_chars <= len(context) <= max_chars:
        yield context


def _question(sentence, num_words=5):
  """ "In what year <the sentence's first words>?" """
  words = _WORD.findall(_YEAR.sub(" ", sentence))[:num_words]
  return "In what year " + " ".join(words).lower() + "?"


def squad_json(count, *, seed, version_2=False, skip=0):
  """A SQuAD-format dict of ``count`` year questions (+ ``count // 2`` unanswerable ones for
  SQuAD 2.0), from the corpus's paragraphs after the first ``skip`` of each kind."""
  rng = np.random.default_rng(seed)
  with_year, without_year = [], []
  for context in _paragraphs():
    years = list(_YEAR.finditer(context))
    if len(years) == 1:
      with_year.append((context, years[0]))
    elif not years:
      without_year.append(context)
  paragraphs = []
  for i, (context, year) in enumerate(with_year[skip : skip + count]):
    sentence = next(s for s in re.split(r"(?<=[.!?]) ", context) if year.group() in s)
    qa = {
      "id": f"s{seed}y{i}",
      "question": _question(sentence),
      "answers": [{"text": year.group(), "answer_start": year.start()}],
    }
    if version_2:
      qa["is_impossible"] = False  # SQuAD 2.0 files mark every question.
    paragraphs.append({"context": context, "qas": [qa]})
  if version_2:
    for i, context in enumerate(without_year[skip // 2 : skip // 2 + count // 2]):
      sentences = re.split(r"(?<=[.!?]) ", context)
      paragraphs.append(
        {
          "context": context,
          "qas": [
            {
              "id": f"s{seed}n{i}",
              "question": _question(sentences[rng.integers(len(sentences))]),
              "answers": [],
              "is_impossible": True,
              "plausible_answers": [],
            }
          ],
        }
      )
  rng.shuffle(paragraphs)
  return {
    "version": "v2.0" if version_2 else "1.1",
    "data": [{"title": "enwiki sample", "paragraphs": paragraphs}],
  }


def write_squad_files(directory, *, version_2=False, num_train=320, num_eval=48):
  """Writes train.json and eval.json (disjoint paragraphs) into ``directory``; returns paths."""
  paths = []
  for name, count, skip, seed in (("train", num_train, 0, 0), ("eval", num_eval, num_train, 1)):
    path = directory / f"{name}.json"
    path.write_text(
      json.dumps(squad_json(count, seed=seed, version_2=version_2, skip=skip)), encoding="utf-8"
    )
    paths.append(str(path))
  return paths


def _squad_config(arg, overrides):
  """configs/finetune/squad.py:<arg> with dotted-key ``overrides``."""
  spec = importlib.util.spec_from_file_location(
    "squad_config", _REPO / "configs" / "finetune" / "squad.py"
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return finetune_fixtures.set_keys(module.get_config(arg), overrides)


def _short_run(init_from, train, dev, steps):
  """Overrides of a `steps`-step run from ``init_from`` on the fixture files, length 64."""
  return {
    **finetune_fixtures.short_run(init_from, train, dev, steps),
    # Contexts of 30-90 tokens: many span two windows, so answers cross window edges.
    "data.max_seq_length": 64,
    "data.max_query_length": 16,
    "data.doc_stride": 32,
    "optimizer.learning_rate": 2e-3,
  }


@pytest.mark.parametrize("arg,version_2", [(None, False), ("v2", True)])
def test_squad_config_carries_the_bert_recipe(arg, version_2):
  run = settings.settings_from_config(_squad_config(arg, {"data.tfds_name": "squad/v2.0"}))
  assert run.trainer.task == "span_qa"
  data = run.data
  assert (
    data.max_seq_length,
    data.doc_stride,
    data.max_query_length,
    data.n_best_size,
    data.max_answer_length,
    data.version_2_with_negative,
  ) == (384, 128, 64, 20, 30, version_2)
  assert (
    run.trainer.global_batch_size,
    run.optimizer.learning_rate,
    run.trainer.num_train_epochs,
  ) == (32, 3e-5, 2.0)


def test_unknown_squad_version_is_refused():
  with pytest.raises(UserInputError, match=r"squad.py:v3 is unknown; use squad.py \(SQuAD v1.1\)"):
    _squad_config("v3", {})


def test_malformed_squad_json_stops_the_run_before_training(tmp_path):
  bad = tmp_path / "train.json"
  bad.write_text(
    json.dumps(
      {
        "data": [
          {
            "paragraphs": [
              {
                "context": "It began in 1539.",
                "qas": [
                  {
                    "id": "q1",
                    "question": "When?",
                    "answers": [{"text": "1539", "answer_start": 3}],
                  }
                ],
              }
            ]
          }
        ]
      }
    )
  )
  config = _squad_config(
    None,
    dict(
      finetune_fixtures.model_overrides(),
      **{
        "data.train_path": str(bad),
        "data.eval_path": str(bad),
        "data.max_seq_length": 64,
        "data.max_query_length": 16,
      },
    ),
  )
  with pytest.raises(
    UserInputError,
    match=(
      r"train.json: data\[0\].paragraphs\[0\].qas\[0\] "
      r"\(id 'q1'\): answer_start 3 selects 'bega'"
    ),
  ):
    train_and_evaluate(config, str(tmp_path / "run"), helpers.one_device())
  assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.optimized_xla
def test_squad_2_fine_tunes_from_a_pretraining_workdir_above_chance(
  tiny_pretrained_workdir, tmp_path
):
  train, dev = write_squad_files(tmp_path, version_2=True)
  steps = 60
  config = _squad_config(
    "v2",
    dict(
      finetune_fixtures.model_overrides(), **_short_run(tiny_pretrained_workdir, train, dev, steps)
    ),
  )
  metrics = train_and_evaluate(config, str(tmp_path / "run"), helpers.one_device())
  # 48 answerable and 24 unanswerable eval questions. Chance: always "no answer" scores exact
  # 33.3 (HasAns 0, NoAns 100); a random span of the ~50 context tokens, about 0.
  assert metrics["HasAns_exact"] > 40 and metrics["NoAns_exact"] > 40, metrics
  assert metrics["exact"] > 50 and metrics["f1"] >= metrics["exact"], metrics
  # run_squad.py's files, and evaluate-v2.0's threshold sweep over the written null odds.
  predictions_dir = tmp_path / "run" / "predictions"
  answers = json.loads((predictions_dir / "predictions.json").read_text())
  nbest = json.loads((predictions_dir / "nbest_predictions.json").read_text())
  null_odds = json.loads((predictions_dir / "null_odds.json").read_text())
  gold = {
    qa["id"]: [a["text"] for a in qa["answers"]]
    for article in json.loads(pathlib.Path(dev).read_text())["data"]
    for paragraph in article["paragraphs"]
    for qa in paragraph["qas"]
  }
  assert list(answers) == list(nbest) == list(null_odds) == list(gold)
  assert squad_metrics.squad_scores(gold, answers)["exact"] == metrics["exact"]
  for qid, entries in nbest.items():
    assert sum(entry["probability"] for entry in entries) == pytest.approx(1.0)
    assert "" in [entry["text"] for entry in entries]  # v2.0 lists the null answer.
    assert answers[qid] == (
      "" if null_odds[qid] > 0.0 else next(entry["text"] for entry in entries if entry["text"])
    )
  assert {
    key: metrics[key] for key in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh")
  } == squad_metrics.best_thresholds(gold, answers, null_odds)
  assert metrics["best_exact"] >= metrics["exact"] and metrics["best_f1"] >= metrics["f1"]


@pytest.fixture(scope="module")
def xlnet_pretrained_workdir(tmp_path_factory):
  """A few steps of the XLNet-tiny permutation LM (configs/xlnet_tiny.py's model)."""
  return finetune_fixtures.pretrain_tiny(
    tmp_path_factory.mktemp("xlnet_pretrained"),
    num_train_steps=20,
    **{"model.family": "xlnet", "data.objective": "none"},
  )


@pytest.mark.optimized_xla
def test_squad_fine_tunes_from_an_xlnet_pretraining_workdir(xlnet_pretrained_workdir, tmp_path):
  train, dev = write_squad_files(tmp_path)
  steps = 60
  # No model key: family, shape and vocab are init_from's.
  config = _squad_config(None, _short_run(xlnet_pretrained_workdir, train, dev, steps))
  metrics = train_and_evaluate(config, str(tmp_path / "run"), helpers.one_device())
  model = json.loads((tmp_path / "run" / "config.json").read_text())["model"]
  assert model["family"] == "xlnet"
  # 48 answerable questions; a random span of the ~50 context tokens scores about 0.
  assert metrics["exact"] > 50 and metrics["f1"] >= metrics["exact"], metrics
  # The trunk is the pretrained XLNet encoder under bert/; mask_emb feeds only the query
  # stream, which fine-tuning never runs, so it is exactly the pretrained value (20 pretraining
  # steps moved it by up to 0.008 from its init, std 0.02).
  pretrained = run_helpers.restore_params(xlnet_pretrained_workdir, 20)
  finetuned = run_helpers.restore_params(tmp_path / "run", steps)
  trunk = {name for name in finetuned if name.startswith("bert/")}
  # Only the pooler is new: the permutation LM never ran it (nor does span QA).
  assert trunk - set(pretrained) == {"bert/pooler/bias", "bert/pooler/kernel"}
  np.testing.assert_array_equal(finetuned["bert/mask_emb"], pretrained["bert/mask_emb"])
