"""Multi-task fine-tuning: two fixture tasks on one encoder both learn; sampling and data
positions are exact; kill/resume equals the uninterrupted run; one member exports as a
single-task workdir that the ordinary classification config restores and trains further;
bad member lists fail in one line."""

import json
import shutil

import jax
import numpy as np
import pytest

from bert_jax.data import default_corpus, tokenization
from bert_jax.default_config import finetune_config, multitask_config
from bert_jax.errors import UserInputError
from bert_jax.parallel import mesh as mesh_lib
from bert_jax.parallel import sharding
from bert_jax.tasks.multitask import data as multitask_data
from bert_jax.tasks.multitask import sampling
from bert_jax.tools import export_task
from bert_jax.train import settings as settings_lib
from bert_jax.train import setup
from bert_jax.train.loop import train_and_evaluate
from tests import finetune_fixtures, helpers, run_helpers, xla_options

LENGTH = 64


def _member(name, task, files, **keys):
  return (
    name,
    task,
    dict(dict(train_path=files[0], eval_path=files[1], max_seq_length=LENGTH), **keys),
  )


def _config(members, init_from, steps, **overrides):
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
    **{"optimizer.learning_rate": 1e-3},
  )
  values.update(overrides)
  return finetune_fixtures.set_keys(multitask_config(members), values)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  directory = tmp_path_factory.mktemp("multitask_files")
  return {
    "mrpc": finetune_fixtures.write_mrpc_files(_subdir(directory, "mrpc")),
    "stsb": finetune_fixtures.write_stsb_files(_subdir(directory, "stsb")),
    "ner": finetune_fixtures.write_conll_files(_subdir(directory, "ner"), 192, 48),
  }


def _subdir(directory, name):
  path = directory / name
  path.mkdir()
  return path


STEPS = 96
# The run's first checkpoint, where the resume test "kills" it: late, so that resuming retrains
# only the last few steps (the eval at STEPS and the data position still carry over).
KILLED_AT = 88


@pytest.fixture(scope="module")
def multitask_run(tiny_pretrained_workdir, files, tmp_path_factory):
  """MRPC- and STS-B-layout classification and a CoNLL tagging member, trained together from
  the pretrained model (checkpoints at `KILLED_AT` and the end, both kept)."""
  members = [
    _member("mrpc", "classification", files["mrpc"], glue_task="mrpc"),
    _member("stsb", "classification", files["stsb"], glue_task="stsb"),
    _member("ner", "tagging", files["ner"], max_seq_length=32, weight=2.0),
  ]
  config = _config(
    members,
    tiny_pretrained_workdir,
    STEPS,
    checkpoint_every_steps=KILLED_AT,
    max_checkpoints_to_keep=2,
  )
  workdir = tmp_path_factory.mktemp("multitask_run")
  # Compiled as the resumed run in test_kill_and_resume_... is (bitwise comparison).
  with xla_options.optimized_xla():
    train_and_evaluate(config, str(workdir), helpers.one_device())
  return workdir, config


def test_tasks_trained_together_all_beat_chance(multitask_run):
  workdir, _ = multitask_run
  (row,) = run_helpers.read_metrics(workdir, "eval")
  assert row["step"] == STEPS
  assert row["mrpc/accuracy"] > 0.75 and row["mrpc/f1"] > 0.75, row  # Chance: 0.5.
  assert row["stsb/pearson"] > 0.5 and row["stsb/spearman"] > 0.5, row  # Chance: 0.
  assert row["ner/f1"] > 0.5, row  # Entity F1; predicting all O scores 0.
  (train,) = run_helpers.read_metrics(workdir, "train")
  assert {"mrpc/loss", "mrpc/accuracy", "stsb/loss", "ner/token_accuracy", "loss"} <= set(train)
  params = run_helpers.restore_params(workdir, STEPS)
  assert {name.split("/")[0] for name in params} == {"bert", "mrpc", "stsb", "ner"}
  assert params["mrpc/classifier/kernel"].shape == (128, 2)
  assert params["stsb/classifier/kernel"].shape == (128, 1)


def _train_steps(config, data, devices, batches):
  """Real train steps of ``config`` from the fixed init of key 0 on a mesh over ``devices``.

  Returns:
    ([params after each step], [metrics of each step]) on the host.
  """
  settings = settings_lib.settings_from_config(config)
  mesh = mesh_lib.make_mesh(settings.mesh, devices=devices)
  with setup.mesh_context(mesh, settings.mesh.logical_axis_rules):
    training = setup.build_training(settings, mesh, data)
    state = setup.fresh_state(training)
    rng = jax.device_put(jax.random.key(1), sharding.replicated(mesh))
    params, metrics = [], []
    for batch in batches:
      state, step_metrics = training.train_step(
        state, sharding.host_batch_to_global(batch, mesh), rng
      )
      params.append(jax.device_get(state.params))
      metrics.append(jax.device_get(step_metrics))
    return params, metrics


def test_sharded_member_step_equals_the_single_task_step(files):
  """A multi-task step on a member's batch, on 8 devices (data x fsdp x tensor), is that
  member's single-task step on one device: same loss and gradient norm, same updated trunk and
  head (the other heads get zero gradient); the next, tagging batch trains the tagging head."""
  data = _data(files, **{"data.sampling": "round_robin"})
  run = data.batches("train", 0, 8, 0, 1)
  batches = [next(run), next(run)]  # Round robin: an mrpc batch, then a tagging batch.
  assert [int(b["task_id"][0]) for b in batches] == [0, 1]
  # One encoder layer: a mesh splits every layer alike, and one compiles in about half the time.
  depth = {"model.num_layers": 1}
  sharded = _data_config(
    files,
    global_batch_size=8,
    **depth,
    **{"data.sampling": "round_robin", "mesh.data": 2, "mesh.fsdp": 2, "mesh.tensor": 2},
  )
  params, metrics = _train_steps(sharded, data, jax.devices(), batches)
  single = finetune_fixtures.set_keys(
    finetune_config("classification"),
    dict(
      finetune_fixtures.model_overrides(),
      global_batch_size=8,
      **depth,
      **{
        "mesh.data": 1,
        "data.glue_task": "mrpc",
        "data.train_path": files["mrpc"][0],
        "data.eval_path": files["mrpc"][1],
        "data.max_seq_length": LENGTH,
      },
    ),
  )
  mrpc_batch = next(data.members[0].batches("train", 0, 8, 0, 1))
  (alone,), (alone_metrics,) = _train_steps(
    single, data.members[0], jax.devices()[:1], [mrpc_batch]
  )
  np.testing.assert_allclose(metrics[0]["mrpc/loss"], alone_metrics["loss"], rtol=2e-5)
  np.testing.assert_allclose(metrics[0]["grad_norm"], alone_metrics["grad_norm"], rtol=2e-5)
  assert metrics[0]["ner/loss"] == 0 and metrics[0]["ner/tokens"] == 0
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-4),
    {"bert": params[0]["bert"], "mrpc": params[0]["mrpc"]},
    {"bert": alone["bert"], "mrpc": {"classifier": alone["classifier"]}},
  )
  assert metrics[1]["mrpc/examples"] == 0 and metrics[1]["ner/tokens"] > 0
  assert np.isfinite(metrics[1]["ner/loss"]) and metrics[1]["ner/loss"] > 0
  assert not np.array_equal(
    params[1]["ner"]["tagger"]["kernel"], params[0]["ner"]["tagger"]["kernel"]
  )


@pytest.mark.optimized_xla
def test_kill_and_resume_equals_the_uninterrupted_run(multitask_run, tmp_path):
  """The run "killed" after its first checkpoint (the later one removed) and resumed ends
  with the uninterrupted run's parameters, bitwise, and its eval scores."""
  workdir, config = multitask_run
  killed = tmp_path / "killed"
  shutil.copytree(workdir, killed)
  shutil.rmtree(killed / "checkpoints" / str(STEPS))
  assert run_helpers.checkpoint_steps(killed) == [KILLED_AT]
  train_and_evaluate(config, str(killed), helpers.one_device())
  expected = run_helpers.restore_params(workdir, STEPS)
  actual = run_helpers.restore_params(killed, STEPS)
  assert expected.keys() == actual.keys()
  for name in expected:
    np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)
  assert (
    run_helpers.read_metrics(killed, "eval")[-1] == run_helpers.read_metrics(workdir, "eval")[-1]
  )


def test_sampling_shares_and_schedule():
  sizes, weights = [100, 400, 900], [1.0, 1.0, 0.5]
  np.testing.assert_allclose(
    sampling.probabilities(sizes, weights, "proportional", 2.0), np.array([100, 400, 450]) / 950
  )
  np.testing.assert_allclose(
    sampling.probabilities(sizes, weights, "temperature", 2.0), np.array([10, 20, 15]) / 45
  )
  np.testing.assert_allclose(
    sampling.probabilities(sizes, [1.0, 0.0, 3.0], "round_robin", 2.0), [0.5, 0.0, 0.5]
  )
  cycle = sampling.Schedule([0.5, 0.0, 0.5], "round_robin", seed=0)
  assert cycle.tasks(0, 5).tolist() == [0, 2, 0, 2, 0]
  shares = np.array([0.2, 0.3, 0.5])
  schedule = sampling.Schedule(shares, "proportional", seed=3)
  steps = schedule.tasks(0, 3 * sampling.BLOCK + 17)
  np.testing.assert_allclose(np.bincount(steps) / steps.size, shares, atol=0.02)
  # Any window, and step by step, agrees with the whole sequence; another seed differs.
  window = schedule.tasks(sampling.BLOCK - 5, 2 * sampling.BLOCK + 5)
  np.testing.assert_array_equal(window, steps[sampling.BLOCK - 5 : 2 * sampling.BLOCK + 5])
  fresh = sampling.Schedule(shares, "proportional", seed=3)
  assert [fresh.task_at(k) for k in range(4090, 4100)] == steps[4090:4100].tolist()
  np.testing.assert_array_equal(schedule.counts_before(5000), np.bincount(steps[:5000]))
  assert not np.array_equal(sampling.Schedule(shares, "proportional", 4).tasks(0, 64), steps[:64])


def _data_config(files, **overrides):
  """An mrpc (64 tokens) and a tagging (32 tokens) member, the fixture model's shape."""
  members = [
    _member("mrpc", "classification", files["mrpc"], glue_task="mrpc"),
    _member("ner", "tagging", files["ner"], max_seq_length=32),
  ]
  values = dict(finetune_fixtures.model_overrides(), **overrides)
  return finetune_fixtures.set_keys(multitask_config(members), values)


def _data(files, **overrides):
  settings = settings_lib.settings_from_config(_data_config(files, **overrides))
  tokenizer = tokenization.load_tokenizer(default_corpus.default_vocab_path(), lowercase=True)
  return multitask_data.make_data(settings.data, tokenizer)


def test_batches_follow_the_schedule_and_resume_exactly(files):
  data = _data(files, **{"data.sampling": "temperature", "data.temperature": 3.0})
  batch_size = 8
  schedule = data.schedule(seed=5).tasks(0, 40)
  assert 0 < schedule.mean() < 1  # Both members drawn.

  def take(batches, count):
    return [next(batches) for _ in range(count)]

  run = take(data.batches("train", 5, batch_size, 0, 1), 40)
  for step, batch in enumerate(run):
    assert (batch["task_id"] == schedule[step]).all()
    assert batch["input_ids"].shape == (batch_size, LENGTH)
    other = "ner/label_ids" if schedule[step] == 0 else "mrpc/labels"
    assert not batch[other].any()  # The other member's features are zeros.
  # The tagging rows are its own 32-token features, zero-padded to the shared length.
  tagging = next(b for b, t in zip(run, schedule) if t == 1)
  assert not tagging["input_mask"][:, 32:].any() and tagging["input_mask"][:, 0].all()
  resumed = data.batches("train", 5, batch_size, 0, 1, start_position=23 * batch_size)
  for a, b in zip(take(resumed, 17), run[23:]):
    assert a.keys() == b.keys()
    for key in a:
      np.testing.assert_array_equal(a[key], b[key], err_msg=key)
  # Two hosts each take half of every global batch.
  halves = [take(data.batches("train", 5, batch_size, p, 2), 40) for p in (0, 1)]
  for step, batch in enumerate(run):
    joined = np.concatenate([halves[0][step]["input_ids"], halves[1][step]["input_ids"]])
    np.testing.assert_array_equal(joined, batch["input_ids"])
  # Eval: every member's rows once, row ids offset past the earlier members'.
  row_ids = np.concatenate([b["row_id"] for b in data.batches("eval", 5, batch_size, 0, 1)])
  real = np.sort(row_ids[row_ids >= 0])
  np.testing.assert_array_equal(real, np.arange(data.num_eval_examples))


def test_exported_task_is_a_single_task_workdir_that_fine_tunes_further(
  multitask_run, files, tmp_path
):
  workdir, _ = multitask_run
  exported = export_task.export_task(str(workdir), "mrpc", str(tmp_path / "mrpc"))
  single = run_helpers.restore_params(exported, STEPS)
  multi = run_helpers.restore_params(workdir, STEPS)
  assert {n.split("/")[0] for n in single} == {"bert", "classifier"}
  for name, value in single.items():
    source = name if name.startswith("bert/") else "mrpc/" + name
    np.testing.assert_array_equal(value, multi[source], err_msg=name)
  config = json.loads((exported / "config.json").read_text())
  assert (config["task"], config["data"]["glue_task"], config["exported_from"]["task"]) == (
    "classification",
    "mrpc",
    "mrpc",
  )
  assert config["data"]["vocab_path"] == str((exported / "vocab.txt").resolve())
  # The ordinary classification config from init_from: the first update has learning rate 0
  # (warmup), so step 1's eval is the exported model's, equal to the multi-task eval of mrpc.
  run = tmp_path / "mrpc_further"
  values = dict(
    finetune_fixtures.model_overrides(),
    init_from=str(exported),
    num_train_epochs=0.0,
    num_train_steps=2,
    warmup_fraction=0.0,
    global_batch_size=32,
    log_every_steps=2,
    eval_every_steps=1,
    checkpoint_every_steps=2,
    peak_flops_per_device=1e12,
    **{
      "data.glue_task": "mrpc",
      "data.train_path": files["mrpc"][0],
      "data.eval_path": files["mrpc"][1],
      "data.max_seq_length": LENGTH,
      "optimizer.learning_rate": 1e-4,
      "optimizer.warmup_steps": 2,
    },
  )
  train_and_evaluate(
    finetune_fixtures.set_keys(finetune_config("classification"), values), run, helpers.one_device()
  )
  evals = run_helpers.read_metrics(run, "eval")
  (multi_eval,) = run_helpers.read_metrics(workdir, "eval")
  assert evals[0]["step"] == 1
  assert evals[0]["accuracy"] == pytest.approx(multi_eval["mrpc/accuracy"], abs=1e-9)
  assert evals[0]["f1"] == pytest.approx(multi_eval["mrpc/f1"], abs=1e-9)
  assert evals[-1]["step"] == 2 and evals[-1]["accuracy"] > 0.75
  further = run_helpers.restore_params(run, 2)
  assert not np.array_equal(further["classifier/kernel"], single["classifier/kernel"])


@pytest.mark.parametrize(
  "change,message",
  [
    ({"data.tasks.mrpc.task": "summarization"}, "data.tasks.mrpc.task='summarization' is not"),
    ({"data.tasks.mrpc.task": "multiple_choice"}, "is not a task type multitask can train"),
    ({"data.tasks.mrpc.weight": -1.0}, r"data.tasks.mrpc.weight=-1.0 must be a number >= 0"),
    ({"data.tasks.mrpc.glue_task": "mrcp"}, "data.tasks.mrpc: data.glue_task='mrcp' is not"),
    ({"data.tasks.mrpc.test_path": "test.tsv"}, "multitask writes no test predictions"),
    ({"data.sampling": "uniform"}, "data.sampling='uniform' is unknown; choose one of"),
  ],
  ids=["unknown_task", "multiple_choice", "negative_weight", "glue_task", "test", "sampling"],
)
def test_bad_member_lists_are_one_line_errors(change, message):
  members = [("mrpc", "classification", dict(glue_task="mrpc", train_path="a", eval_path="b"))]
  config = finetune_fixtures.set_keys(multitask_config(members), change)
  with pytest.raises(UserInputError, match=message) as error:
    settings_lib.settings_from_config(config)
  assert "\n" not in str(error.value)


def test_export_refuses_bad_input_in_one_line_and_writes_nothing(multitask_run, tmp_path, capsys):
  workdir, _ = multitask_run
  output = tmp_path / "out"
  for task, where, message in (
    ("rte", workdir, "error: no task 'rte' in this multi-task run; its tasks: mrpc, ner, stsb"),
    ("mrpc", tmp_path / "none", f"error: --workdir={tmp_path / 'none'} does not exist"),
  ):
    argv = ["export_task", f"--workdir={where}", f"--task={task}", f"--output={output}"]
    assert export_task.main(argv) == 2
    assert capsys.readouterr().err.strip().startswith(message)
    assert not output.exists()


def test_empty_list_and_all_zero_weights_are_refused(tmp_path):
  with pytest.raises(UserInputError, match="data.tasks is empty; list the member tasks"):
    settings_lib.settings_from_config(multitask_config([]))
  zero = [("a", "tagging", dict(train_path="a", eval_path="b", weight=0.0))]
  with pytest.raises(UserInputError, match=r"every data.tasks.\*.weight is 0"):
    settings_lib.settings_from_config(multitask_config(zero))
  with pytest.raises(UserInputError, match="task name 'bert' must be"):
    settings_lib.settings_from_config(multitask_config([("bert", "tagging", {})]))
