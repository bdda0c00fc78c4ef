"""Every task the registry builds satisfies `tasks.interface.Task`, its capabilities agree with
what it implements, and `make_task` / `make_data` read only the `TaskSettings` slice."""

import dataclasses
import json
import types

import ml_collections
import numpy as np
import pytest

from bert_jax import names
from bert_jax.data.pretraining_config import PretrainingDataConfig
from bert_jax.models.config import ModelConfig
from bert_jax.models.families import model_config_from_dict
from bert_jax.models.recurrence_options import with_recurrence
from bert_jax.tasks import interface, registry
from bert_jax.tasks.distillation import DistillationConfig
from bert_jax.tasks.finetune_config import FinetuneDataConfig
from bert_jax.tasks.multitask.config import MultitaskDataConfig
from bert_jax.tasks.task_settings import TaskSettings
from bert_jax.train import settings as settings_lib

BATCH = 4
SMALL = {
  "vocab_size": 64,
  "hidden_size": 8,
  "num_layers": 2,
  "num_heads": 2,
  "intermediate_size": 16,
}
PRETRAINING_DATA = PretrainingDataConfig(max_seq_length=16, max_predictions_per_seq=3)
MLM_ONLY = dataclasses.replace(PRETRAINING_DATA, objective="none")  # Families without NSP.
FILES = {"train_path": "train.tsv", "eval_path": "dev.tsv"}  # Never read: no make_data here.
FINETUNING_DATA = FinetuneDataConfig(max_seq_length=16, **FILES)
# The data object's facts the fine-tuning objectives are sized by.
SIZES = types.SimpleNamespace(num_labels=3, label_names=("O", "B-X", "I-X"))
# The tasks on the pretraining corpus (fixture labels): benchmarks feed them random batches.
RANDOM_BATCH_TASKS = ("mlm", "permutation_lm", "electra", "xlm", "clm", "distillation")


def _settings(task, model=None, data=PRETRAINING_DATA, **fields):
  model = model or ModelConfig(**SMALL)
  return TaskSettings(task=task, model=model, data=data, global_batch_size=BATCH, **fields)


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory):
  """A distillation teacher as `tools/aot_compile` takes it: its config.json, no weights."""
  path = tmp_path_factory.mktemp("teacher")
  (path / "config.json").write_text(json.dumps({"model": dict(SMALL, num_layers=4)}))
  return str(path)


@pytest.fixture(scope="module")
def tasks(teacher_dir):
  """{label: task} of every task type and every family objective, built by the registry."""
  multitask = MultitaskDataConfig(
    tasks={
      "cola": {"task": names.CLASSIFICATION, "max_seq_length": 16, **FILES},
      "ner": {"task": names.TAGGING, "max_seq_length": 12, **FILES},
      "squad": {"task": names.SPAN_QA, "max_seq_length": 16, **FILES},
    }
  )
  member_data = types.SimpleNamespace(members=(SIZES,) * 3)
  xlm = model_config_from_dict(dict(SMALL, family="xlm"))
  built = {
    "mlm": registry.make_task(_settings(names.PRETRAINING)),
    "permutation_lm": registry.make_task(
      _settings(names.PRETRAINING, model_config_from_dict(dict(SMALL, family="xlnet")), MLM_ONLY)
    ),
    "electra": registry.make_task(
      _settings(names.PRETRAINING, model_config_from_dict(dict(SMALL, family="electra")), MLM_ONLY)
    ),
    "xlm": registry.make_task(_settings(names.PRETRAINING, xlm, MLM_ONLY)),
    "clm": registry.make_task(
      _settings(
        names.PRETRAINING,
        model_config_from_dict(dict(SMALL, family="transformer_xl", causal=True)),
        dataclasses.replace(PRETRAINING_DATA, objective=names.CLM),
      )
    ),
    "distillation": registry.make_task(
      _settings(names.DISTILLATION, distillation=DistillationConfig(teacher=teacher_dir))
    ),
    "multitask": registry.make_task(_settings(names.MULTITASK, data=multitask), member_data),
  }
  for task in names.FINETUNING_TASKS:
    if task != names.MULTITASK:
      built[task] = registry.make_task(_settings(task, data=FINETUNING_DATA), SIZES)
  return built


def _concrete_task_classes(cls=interface.TaskDefaults):
  for subclass in cls.__subclasses__():
    if "example_batch" in vars(subclass):
      yield subclass
    yield from _concrete_task_classes(subclass)


def test_every_task_class_is_built_here(tasks):
  # A new task class (on `TaskDefaults`) must be added to the fixture, so it is checked below.
  built = {type(task) for task in tasks.values()}
  assert set(_concrete_task_classes()) <= built


def _schema(batch):
  return {key: (np.shape(value), np.asarray(value).dtype) for key, value in batch.items()}


@pytest.mark.parametrize("label", RANDOM_BATCH_TASKS + names.FINETUNING_TASKS)
def test_task_satisfies_the_interface_and_its_capabilities(tasks, label):
  task = tasks[label]
  assert isinstance(task, interface.Task)
  assert isinstance(task, interface.PredictingTask) == task.predicts
  assert task.predicts == (label in names.FINETUNING_TASKS)
  assert (task.teacher is not None) == (label == "distillation")
  recurrent = task.mem_len > 0 or task.eval_mem_len > 0 or task.checkpoint_record(BATCH)
  assert not recurrent or isinstance(task, interface.RecurrentTask)
  example = task.example_batch(BATCH)
  assert all(value.shape[0] == BATCH for value in example.values())
  if label in RANDOM_BATCH_TASKS:
    # Benchmarks and compile checks feed random batches to a step built for example_batch's
    # schema (a distillation step's teacher adds its outputs to the pipeline's keys).
    assert isinstance(task, interface.RandomBatchTask)
    pipeline_batch = task.data_example_batch(BATCH) if label == "distillation" else example
    assert _schema(task.random_batch(BATCH)) == _schema(pipeline_batch)


def test_only_a_causal_lm_records_what_its_resume_must_match(tasks):
  records = {label: task.checkpoint_record(BATCH) for label, task in tasks.items()}
  assert records.pop("clm") == {"clm_rows": BATCH, "clm_segment_len": 16}
  assert set(records.values()) == {None}


def test_memory_lengths_come_from_the_model_section(tasks):
  clm = tasks["clm"]
  with_memory = dataclasses.replace(clm, model_config=with_recurrence(clm.model_config, mem_len=8))
  assert (with_memory.mem_len, with_memory.eval_mem_len) == (8, 8)
  longer_eval = with_recurrence(clm.model_config, mem_len=8, eval_mem_len=24)
  assert dataclasses.replace(clm, model_config=longer_eval).eval_mem_len == 24
  assert all(t.mem_len == t.eval_mem_len == 0 for label, t in tasks.items() if label != "clm")


def test_run_settings_hand_the_registry_only_the_task_slice(tmp_path):
  config = ml_collections.ConfigDict(
    {
      "task": names.PRETRAINING,
      "global_batch_size": 8,
      "init_from": "",
      "model": SMALL,
      "data": {"max_seq_length": 16, "max_predictions_per_seq": 3},
    }
  )
  run = settings_lib.settings_from_config(config, str(tmp_path / "run"))
  assert run.task_settings == TaskSettings(
    task=names.PRETRAINING,
    model=run.model,
    data=run.data,
    global_batch_size=8,
    init_from="",
    distillation=run.distillation,
  )
  task = registry.make_task(run.task_settings)
  assert (task.max_seq_length, task.max_predictions_per_seq) == (16, 3)


def test_a_task_sized_by_its_data_refuses_to_be_built_without_it():
  with pytest.raises(ValueError, match="task 'tagging' is sized by its data; pass make_data"):
    registry.make_task(_settings(names.TAGGING, data=FINETUNING_DATA))


def test_the_teacher_default_of_other_tasks_is_no_default_of_distillation(tasks):
  task = tasks["distillation"]
  with pytest.raises(TypeError, match="teacher"):
    type(task)(task.model_config, task.max_seq_length, task.max_predictions_per_seq, task.settings)
