"""Fine-tuning end to end: the tiny pretrained model (or converted Hugging Face weights) on small
learnable local fixtures reaches clearly-above-chance eval scores; a frozen encoder stays bitwise
as restored; bad input is one clear line (exit 2) and overwrites nothing.

Tagging and span QA have their end-to-end runs beside their own tests
(tests/test_tagging_pipeline.py, tests/test_squad_finetune.py)."""

import pathlib

import jax
import numpy as np
import pytest

from bert_jax.data import default_corpus
from bert_jax.default_config import finetune_config
from bert_jax.errors import UserInputError
from bert_jax.parallel import mesh as mesh_lib
from bert_jax.parallel import sharding
from bert_jax.tasks import registry
from bert_jax.train import run_state, setup
from bert_jax.train import settings as settings_lib
from bert_jax.train.checkpointing import Checkpointer
from bert_jax.train.loop import train_and_evaluate
from tests import finetune_fixtures, helpers, run_helpers, xla_options


def _config(task, init_from, steps=40, **overrides):
  """A short fine-tuning run of the fixture model (fixed steps, eval at the end)."""
  values = dict(
    finetune_fixtures.model_overrides(),
    init_from=str(init_from),
    num_train_epochs=0.0,
    num_train_steps=steps,
    global_batch_size=32,
    log_every_steps=steps,
    eval_every_steps=steps,
    checkpoint_every_steps=steps,
    peak_flops_per_device=1e12,
    **{"data.max_seq_length": 64, "optimizer.learning_rate": 1e-3},
  )
  values.update(overrides)
  return finetune_fixtures.set_keys(finetune_config(task), values)


def _glue(glue_task, files, init_from, **overrides):
  values = {"data.glue_task": glue_task, "data.train_path": files[0], "data.eval_path": files[1]}
  values.update(overrides)
  return _config("classification", init_from, **values)


@pytest.fixture(scope="module")
def mrpc_files(tmp_path_factory):
  return finetune_fixtures.write_mrpc_files(tmp_path_factory.mktemp("mrpc"))


def _mrpc_test_file(dev_path):
  """GLUE's MRPC test.tsv layout (index first, no label) holding the dev rows, indexes 100+."""
  lines = pathlib.Path(dev_path).read_text(encoding="utf-8-sig").splitlines()[1:]
  rows = [f"{100 + i}\t" + "\t".join(line.split("\t")[1:]) for i, line in enumerate(lines)]
  path = pathlib.Path(dev_path).with_name("test.tsv")
  path.write_text("index\t#1 ID\t#2 ID\t#1 String\t#2 String\n" + "\n".join(rows) + "\n")
  return str(path)


@pytest.fixture(scope="module")
def mrpc_workdir(tiny_pretrained_workdir, mrpc_files, tmp_path_factory):
  """MRPC-layout classification fine-tuned from the pretraining workdir; it predicts a test
  file (the dev rows in test.tsv's layout) and writes its dev predictions."""
  workdir = tmp_path_factory.mktemp("mrpc_run")
  # 40 steps of 32 x 64 tokens: XLA's optimisations save more run time than they cost to compile.
  with xla_options.optimized_xla():
    train_and_evaluate(
      _glue(
        "mrpc",
        mrpc_files,
        tiny_pretrained_workdir,
        **{"data.test_path": _mrpc_test_file(mrpc_files[1]), "data.write_eval_predictions": True},
      ),
      str(workdir),
      helpers.one_device(),
    )
  return workdir


def test_classification_from_a_pretraining_workdir(mrpc_workdir):
  (row,) = run_helpers.read_metrics(mrpc_workdir, "eval")
  assert row["step"] == 40
  assert row["accuracy"] > 0.8 and row["f1"] > 0.8, row  # Chance: 0.5.
  (train,) = run_helpers.read_metrics(mrpc_workdir, "train")
  assert np.isfinite(train["mfu"]) and train["mfu"] > 0 and train["tokens_per_sec"] > 0


def test_test_and_dev_predictions_are_written_as_the_leaderboard_wants(mrpc_workdir, mrpc_files):
  predictions = mrpc_workdir / "predictions"
  test_lines = (predictions / "MRPC.tsv").read_text().splitlines()
  dev_lines = (predictions / "dev" / "MRPC.tsv").read_text().splitlines()
  assert test_lines[0] == dev_lines[0] == "index\tprediction"
  labels = [
    line.split("\t")[0]
    for line in pathlib.Path(mrpc_files[1]).read_text(encoding="utf-8-sig").splitlines()[1:]
  ]
  assert [line.split("\t")[0] for line in test_lines[1:]] == [
    str(100 + i) for i in range(len(labels))
  ]
  assert [line.split("\t")[0] for line in dev_lines[1:]] == [str(i) for i in range(len(labels))]
  # The test rows are the dev rows: the same predictions, scoring the eval's accuracy.
  predicted = [line.split("\t")[1] for line in test_lines[1:]]
  assert predicted == [line.split("\t")[1] for line in dev_lines[1:]]
  assert set(predicted) <= {"0", "1"}
  (row,) = run_helpers.read_metrics(mrpc_workdir, "eval")
  assert np.mean(np.array(predicted) == np.array(labels)) == pytest.approx(row["accuracy"])


@pytest.mark.optimized_xla
def test_regression_from_converted_hugging_face_weights(tmp_path):
  """STS-B-layout regression from a random-init transformers BertForPreTraining, converted
  with `bert_jax.tools.convert` (its vocab.txt then serves as the run's vocab)."""
  transformers = pytest.importorskip("transformers")
  torch = pytest.importorskip("torch")
  from bert_jax.tools import convert  # pylint: disable=g-import-not-at-top
  from tests import hf_reference  # pylint: disable=g-import-not-at-top

  model = hf_reference.random_bert(
    transformers,
    torch,
    vocab_size=8192,
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
  files = finetune_fixtures.write_stsb_files(tmp_path)
  metrics = train_and_evaluate(
    _glue("stsb", files, tmp_path / "converted"), str(tmp_path / "run"), helpers.one_device()
  )
  assert metrics["spearman"] > 0.5 and metrics["pearson"] > 0.5, metrics  # Chance: 0.


@pytest.mark.optimized_xla
def test_multiple_choice_from_a_pretraining_workdir(tiny_pretrained_workdir, tmp_path):
  train, dev = finetune_fixtures.write_swag_files(tmp_path)
  metrics = train_and_evaluate(
    _config(
      "multiple_choice",
      tiny_pretrained_workdir,
      steps=30,
      **{
        "data.train_path": train,
        "data.eval_path": dev,
        "global_batch_size": 16,
        "data.max_seq_length": 48,
      },
    ),
    str(tmp_path / "run"),
    helpers.one_device(),
  )
  assert metrics["accuracy"] > 0.6, metrics  # Chance: 0.25.


def _flat(tree):
  return {
    "/".join(key.key for key in path): leaf
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
  }


def test_frozen_encoder_stays_as_restored(tiny_pretrained_workdir, mrpc_files, tmp_path):
  """Two real train steps with freeze_encoder: the restored encoder is bitwise unchanged."""
  run = settings_lib.settings_from_config(
    _glue("mrpc", mrpc_files, tiny_pretrained_workdir, freeze_encoder=True)
  )
  data = registry.make_data(run.task_settings)
  mesh = mesh_lib.make_mesh(run.mesh, helpers.one_device())
  checkpointer = Checkpointer(str(tmp_path))
  with setup.mesh_context(mesh, run.mesh.logical_axis_rules):
    training = setup.build_training(run, mesh, data)
    state, rng, _ = run_state.restore_or_initialize(
      checkpointer,
      training.init_params,
      training.optimizer,
      training.abstract_state,
      training.state_shardings,
      0,
      sharding.replicated(mesh),
      run.trainer.init_from,
    )
    head = jax.device_get(state.params["classifier"])
    batches = data.batches("train", 0, 32, 0, 1)
    for _ in range(2):
      state, _ = training.train_step(state, sharding.host_batch_to_global(next(batches), mesh), rng)
    trained = _flat(jax.device_get(state.params))
  checkpointer.close()
  pretrained = run_helpers.restore_params(
    tiny_pretrained_workdir, run_helpers.checkpoint_steps(tiny_pretrained_workdir)[-1]
  )
  encoder = [name for name in trained if name.startswith("bert/")]
  assert len(encoder) == len([n for n in pretrained if n.startswith("bert/")]) > 20
  for name in encoder:
    np.testing.assert_array_equal(trained[name], pretrained[name], err_msg=name)
  assert not np.array_equal(trained["classifier/kernel"], head["kernel"])


def _snapshot(*paths):
  files = [p for path in paths for p in ([path] if path.is_file() else path.rglob("*"))]
  return {p: p.stat().st_mtime_ns for p in files if p.is_file()}


def _no_checkpoints(workdir):
  checkpoints = pathlib.Path(workdir) / "checkpoints"
  return not checkpoints.exists() or not any(checkpoints.iterdir())


def test_label_count_mismatch_exits_2_with_one_line(
  tiny_pretrained_workdir, mrpc_workdir, tmp_path
):
  """`python -m bert_jax.main`: the 2-label MRPC run restored into a 3-label MNLI model."""
  mnli = tmp_path / "mnli.tsv"
  mnli.write_text("index\tsentence1\tsentence2\tgold_label\n0\tA man eats.\tHe eats.\tentailment\n")
  flags = [
    *finetune_fixtures.model_flags(),
    f"--config.init_from={mrpc_workdir}",
    f"--config.data.train_path={mnli}",
    f"--config.data.eval_path={mnli}",
  ]
  before = _snapshot(mrpc_workdir)
  result = run_helpers.run_main(
    tmp_path / "run", flags, timeout=600, config="configs/finetune/glue.py:mnli"
  )
  assert result.returncode == 2, result.stderr[-2000:]
  line = [line for line in result.stderr.splitlines() if line.strip()][-1]
  assert line.startswith(
    f"error: init_from {mrpc_workdir}/checkpoints/40 does not fit this "
    "model: head 'classifier' has 2 labels in the checkpoint, 3 in this "
    "model: make the task's label count 2"
  ), line
  assert _no_checkpoints(tmp_path / "run") and _snapshot(mrpc_workdir) == before


def test_bad_input_is_one_line_naming_the_fix(tiny_pretrained_workdir, mrpc_files, tmp_path):
  """The other bad inputs, in process (main prints the message as its one `error:` line)."""
  step = run_helpers.checkpoint_steps(tiny_pretrained_workdir)[-1]
  big_vocab = tmp_path / "vocab_30522.txt"
  tokens = pathlib.Path(default_corpus.default_vocab_path()).read_text().splitlines()
  big_vocab.write_text(
    "\n".join(tokens + [f"[extra{i}]" for i in range(30522 - len(tokens))]) + "\n"
  )
  malformed = tmp_path / "train.tsv"
  malformed.write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\tb\n1\tshort\n")
  train, dev = mrpc_files
  cases = {
    "vocab": (
      {"model.vocab_size": 30522, "data.vocab_path": str(big_vocab)},
      (
        "init_from {}/checkpoints/{} does not fit this model: the checkpoint has 8192 "
        "vocab entries, this model 30522 (model.vocab_size=30522): set model.vocab_size="
        "8192 and data.vocab_path to the checkpoint's vocab; its config.json has another "
        "model: pass --config.model.vocab_size=8192 to match it"
      ),
    ),
    "unknown_task": ({"data.glue_task": "mrcp"}, "'mrcp' is not a GLUE task; choose one of"),
    "missing_file": (
      {"data.train_path": "/nonexistent/train.tsv"},
      "data file /nonexistent/train.tsv does not exist",
    ),
    "malformed_tsv": (
      {"data.train_path": str(malformed)},
      f"{malformed}:3 has 2 columns, the task needs at least 5",
    ),
  }
  before = _snapshot(tiny_pretrained_workdir, pathlib.Path(train).parent)
  for name, (overrides, expected) in cases.items():
    with pytest.raises(UserInputError) as error:
      train_and_evaluate(
        _glue("mrpc", (train, dev), tiny_pretrained_workdir, **overrides),
        str(tmp_path / name),
        helpers.one_device(),
      )
    message = str(error.value)
    assert "\n" not in message, message
    assert expected.format(tiny_pretrained_workdir, step) in message, message
    assert _no_checkpoints(tmp_path / name), name
  assert _snapshot(tiny_pretrained_workdir, pathlib.Path(train).parent) == before
