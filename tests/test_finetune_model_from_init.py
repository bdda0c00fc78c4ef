"""Fine-tuning takes the model from ``init_from`` (shape, vocab, family); explicit model keys
win and are checked against the checkpoint; a refused run leaves its workdir byte-identical."""

import hashlib
import json
import pathlib

import pytest

from bert_jax.data import default_corpus
from bert_jax.errors import UserInputError
from bert_jax.train.loop import train_and_evaluate
from tests import finetune_fixtures, helpers, hf_reference, run_helpers

# A converted 3-layer, 192-wide encoder with 3 heads: every size far from the BERT-base
# defaults of the fine-tuning configs, and small enough to convert and fine-tune in seconds.
_SHAPE = dict(num_layers=3, hidden_size=192, num_heads=3, intermediate_size=768, vocab_size=8192)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
  """A random-init transformers BertModel of `_SHAPE` with the embedded vocab, converted."""
  transformers = pytest.importorskip("transformers")
  torch = pytest.importorskip("torch")
  from bert_jax.tools import convert  # pylint: disable=g-import-not-at-top

  root = tmp_path_factory.mktemp("model_from_init")
  model = hf_reference.random_bert(
    transformers,
    torch,
    kind="model",
    vocab_size=_SHAPE["vocab_size"],
    hidden_size=_SHAPE["hidden_size"],
    num_hidden_layers=_SHAPE["num_layers"],
    num_attention_heads=_SHAPE["num_heads"],
    intermediate_size=_SHAPE["intermediate_size"],
    max_position_embeddings=64,
  )
  model.save_pretrained(root / "hf")
  (root / "hf" / "vocab.txt").write_bytes(
    pathlib.Path(default_corpus.default_vocab_path()).read_bytes()
  )
  convert.from_hf(str(root / "hf"), str(root / "converted"))
  return root / "converted"


@pytest.fixture(scope="module")
def data_flags(tmp_path_factory):
  """The data keys of a short MRPC-layout run (files, length, a few examples)."""
  train, dev = finetune_fixtures.write_mrpc_files(
    tmp_path_factory.mktemp("mrpc"), num_train=16, num_eval=8
  )
  return {
    "data.train_path": train,
    "data.eval_path": dev,
    "data.max_seq_length": 32,
  }


def _run_keys(**overrides):
  """Run length and logging only: no model key."""
  values = dict(
    num_train_epochs=0.0,
    num_train_steps=2,
    global_batch_size=8,
    log_every_steps=2,
    eval_every_steps=2,
    checkpoint_every_steps=2,
    peak_flops_per_device=1e12,
  )
  values.update(overrides)
  return values


@pytest.fixture(scope="module")
def finetuned(converted, data_flags, tmp_path_factory):
  """glue.py:mrpc with only init_from, the data keys and the run length."""
  workdir = tmp_path_factory.mktemp("finetuned") / "run"
  metrics = train_and_evaluate(
    finetune_fixtures.glue_config(
      "mrpc", {"init_from": str(converted), **data_flags, **_run_keys()}
    ),
    str(workdir),
    helpers.one_device(),
  )
  return workdir, metrics


def test_finetuning_takes_the_shape_vocab_and_family_of_init_from(finetuned, converted):
  workdir, metrics = finetuned
  assert 0.0 <= metrics["accuracy"] <= 1.0 and metrics["loss"] > 0, metrics
  model = json.loads((workdir / "config.json").read_text())["model"]
  assert {k: model[k] for k in _SHAPE} == _SHAPE
  assert model["max_position_embeddings"] == 64 and model["family"] == "bert"
  stored = json.loads((converted / "config.json").read_text())["model"]
  assert model == stored  # Every architecture key is the checkpoint's, dropout included.
  params = run_helpers.restore_params(workdir, 2)
  assert params["bert/encoder/layer_2/attention/query/kernel"].shape[0] == 192
  assert "bert/encoder/layer_3/attention/query/kernel" not in params


def _tree_digest(path):
  """sha256 over every file's relative name and bytes (and every directory's name)."""
  digest = hashlib.sha256()
  for item in sorted(pathlib.Path(path).rglob("*")):
    digest.update(str(item.relative_to(path)).encode())
    if item.is_file():
      digest.update(item.read_bytes())
  return digest.hexdigest()


def test_refused_runs_write_nothing(finetuned, converted, data_flags, tmp_path):
  """Explicit model keys that do not fit the checkpoint, and other refusals, before any write:
  a fresh workdir stays absent, an existing run's workdir byte-identical."""
  workdir, _ = finetuned
  before = _tree_digest(workdir)
  fresh = tmp_path / "fresh"
  bad_tsv = tmp_path / "bad.tsv"
  bad_tsv.write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\tshort\n")
  cases = [
    # An explicit key wins, so it must fit: the error names the checkpoint's value.
    ({"model.num_layers": 4}, "pass --config.model.num_layers=3 to match it"),
    ({"model.size": "base"}, "pass --config.model.hidden_size=192"),
    ({"data.train_path": str(bad_tsv)}, "has 2 columns, the task needs at least 5"),
    ({"data.vocab_path": str(tmp_path / "none.txt")}, "none.txt"),
    ({"init_from": str(tmp_path)}, "holds no checkpoint"),
  ]
  for overrides, expected in cases:
    config = finetune_fixtures.glue_config(
      "mrpc", {"init_from": str(converted), **data_flags, **_run_keys()}
    )
    with pytest.raises((UserInputError, FileNotFoundError), match=expected):
      train_and_evaluate(
        finetune_fixtures.set_keys(config, overrides), str(fresh), helpers.one_device()
      )
    assert not fresh.exists(), overrides
  # The same run again with another model, or bad data: refused before config.json is rewritten.
  for overrides, expected in (
    ({"model.num_heads": 12}, "holds a run with model.num_heads=3 but the config says 12"),
    ({"data.train_path": str(bad_tsv)}, "has 2 columns"),
  ):
    config = finetune_fixtures.glue_config(
      "mrpc", {"init_from": str(converted), **data_flags, **_run_keys()}
    )
    with pytest.raises(UserInputError, match=expected):
      train_and_evaluate(
        finetune_fixtures.set_keys(config, overrides), str(workdir), helpers.one_device()
      )
  assert _tree_digest(workdir) == before
