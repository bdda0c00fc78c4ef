"""Fine-tuning on your own CSV/TSV: configs/finetune/classification.py as its docstring (and the
README) runs it, ``label_names`` spelt as a command line spells it, and GLUE configs that refuse
the custom-file keys instead of silently keeping their task."""

import importlib.util
import json
import pathlib

import pytest

from bert_jax.errors import UserInputError
from bert_jax.tasks.finetune_config import label_list
from bert_jax.train import settings
from tests import finetune_fixtures, run_helpers


@pytest.mark.parametrize(
  "spelling",
  [("neg,pos",), "neg,pos", ("[neg,pos]",), ("neg", "pos"), ("(neg, pos)",), (" neg , pos ",)],
)
def test_label_names_as_the_command_line_spells_them(spelling):
  assert label_list(spelling) == ("neg", "pos")


def test_numeric_label_names():
  assert label_list((0, 1)) == ("0", "1") and label_list(()) == ()


def _load(name, arg=None):
  path = run_helpers.REPO / "configs" / "finetune" / f"{name}.py"
  spec = importlib.util.spec_from_file_location(f"{name}_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config() if arg is None else module.get_config(arg)


_FILES = {"data.train_path": "train.tsv", "data.eval_path": "dev.tsv"}


def test_glue_config_refuses_custom_file_keys_and_names_the_config_that_takes_them():
  config = finetune_fixtures.set_keys(
    _load("glue", "mrpc"), {**_FILES, "data.text_a_column": "review"}
  )
  with pytest.raises(UserInputError, match=r"glue_task='mrpc' fixes the columns.*classification"):
    settings.settings_from_config(config)
  custom = finetune_fixtures.set_keys(
    _load("glue", "custom"), {**_FILES, "data.label_names": ("a,b",)}
  )
  data = settings.settings_from_config(custom).data
  assert (data.glue_task, data.label_names, data.text_a_column) == ("", ("a", "b"), "text")


def test_one_label_shows_the_spelling_that_works(tmp_path):
  from bert_jax.tasks import registry  # pylint: disable=g-import-not-at-top

  (tmp_path / "t.tsv").write_text("text\tlabel\nfine\tpos\n")
  config = finetune_fixtures.set_keys(
    _load("classification"),
    {
      "data.train_path": str(tmp_path / "t.tsv"),
      "data.eval_path": str(tmp_path / "t.tsv"),
      "data.label_names": ("pos",),
      "model.vocab_size": 8192,
    },
  )
  with pytest.raises(UserInputError, match="e.g. --config.data.label_names=neg,pos"):
    registry.make_data(settings.settings_from_config(config).task_settings)


def _custom_files(directory):
  """The MRPC fixture as a custom TSV: columns review / summary / sentiment, labels neg / pos."""
  paths = []
  for source in finetune_fixtures.write_mrpc_files(directory, num_train=256, num_eval=64):
    rows = pathlib.Path(source).read_text(encoding="utf-8-sig").splitlines()[1:]
    lines = ["review\tsummary\tsentiment"]
    for row in rows:
      label, _, _, a, b = row.split("\t")
      lines.append(f"{a}\t{b}\t{'pos' if label == '1' else 'neg'}")
    path = pathlib.Path(directory) / f"custom_{pathlib.Path(source).name}"
    path.write_text("\n".join(lines) + "\n")
    paths.append(path)
  return paths


def test_custom_tsv_run_from_the_documented_command(tiny_pretrained_workdir, tmp_path):
  """The docstring's command (plus a second column and a short run) on the tiny model."""
  train, dev = _custom_files(tmp_path)
  flags = [
    f"--config.init_from={tiny_pretrained_workdir}",
    f"--config.data.train_path={train}",
    f"--config.data.eval_path={dev}",
    "--config.data.text_a_column=review",
    "--config.data.text_b_column=summary",
    "--config.data.label_column=sentiment",
    "--config.data.label_names=neg,pos",
    # A short run: 30 steps at a high learning rate, eval at the end.
    "--config.num_train_epochs=0",
    "--config.num_train_steps=30",
    "--config.eval_every_steps=30",
    "--config.checkpoint_every_steps=30",
    "--config.optimizer.learning_rate=1e-3",
    "--config.data.max_seq_length=64",
  ]
  result = run_helpers.run_main(
    tmp_path / "run", flags, timeout=600, config="configs/finetune/classification.py"
  )
  assert result.returncode == 0, result.stderr[-3000:]
  (row,) = run_helpers.read_metrics(tmp_path / "run", "eval")
  assert row["accuracy"] > 0.75 and row["f1"] > 0.75, row  # Chance: 0.5.
  stored = json.loads((tmp_path / "run" / "config.json").read_text())
  assert stored["model"]["hidden_size"] == 128 and stored["model"]["num_layers"] == 2
