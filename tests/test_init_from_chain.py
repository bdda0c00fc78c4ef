"""What ``init_from`` gives a run is read once: each config.json along its chain, one read."""

import collections
import json
import shutil

import pytest

from bert_jax import workdir as workdir_lib
from bert_jax.data import default_corpus
from bert_jax.default_config import finetune_config
from bert_jax.tasks import registry
from bert_jax.train.settings import settings_from_config


def _copy(source, destination, **config_changes):
  """A copy of a run (checkpoints and config.json), its config.json's sections changed."""
  shutil.copytree(source, destination, ignore=shutil.ignore_patterns("run.lock", "tensorboard"))
  path = destination / "config.json"
  config = json.loads(path.read_text())
  config.update(config_changes)
  path.write_text(json.dumps(config) + "\n")
  return destination


@pytest.fixture
def reads(monkeypatch):
  """{config.json path: times read} while the test runs (the real reader underneath)."""
  counts = collections.Counter()
  read = workdir_lib.Workdir.read_config

  def counting(run):
    counts[str(run.config_json)] += 1
    return read(run)

  monkeypatch.setattr(workdir_lib.Workdir, "read_config", counting)
  return counts


def test_a_fine_tuning_run_reads_each_config_json_of_its_chain_once(
  tiny_pretrained_workdir, tmp_path, reads
):
  vocab = default_corpus.default_vocab_path()
  pretrained = json.loads((tiny_pretrained_workdir / "config.json").read_text())
  # A pretraining run recording a cased vocab, and a run fine-tuned from it that records none.
  first = _copy(
    tiny_pretrained_workdir, tmp_path / "first", data={"vocab_path": vocab, "lowercase": False}
  )
  second = _copy(tiny_pretrained_workdir, tmp_path / "second", data={}, init_from=str(first))
  config = finetune_config("classification")
  config.init_from = str(second)
  config.data.train_path = config.data.eval_path = str(second / "config.json")  # Unread.
  settings = settings_from_config(config, str(tmp_path / "fresh"))
  assert (settings.data.vocab_path, settings.data.lowercase) == (vocab, False)
  assert settings.model.vocab_size == pretrained["model"]["vocab_size"]
  assert registry.resolve_vocab_path(settings.data.vocab_path, config.init_from) == vocab
  assert dict(reads) == {str(second / "config.json"): 1, str(first / "config.json"): 1}
