"""The ConfigDict every configs/*.py starts from, generated from the settings dataclasses.

A key's default and description are declared once, on its settings dataclass field
(`bert_jax.config_fields.option`): top-level keys on `TrainerConfig`, the sections on
`ModelConfig`, `PretrainingDataConfig` / `FinetuneDataConfig`, `OptimizerConfig` and
`MeshConfig`. `base_config` is those defaults (BERT-base pretraining as in the paper, on the
embedded corpus); `finetune_config(task)` overrides them with BERT's fine-tuning recipe.

Top-level keys (contract): seed, num_train_steps, global_batch_size, log_every_steps,
eval_every_steps, checkpoint_every_steps, init_from. Sections: model, data, optimizer, mesh.
`describe()` lists every key with its default and description.
"""

import dataclasses
from collections.abc import Iterator
from typing import NamedTuple

import ml_collections

from bert_jax import config_fields, names
from bert_jax.data.pretraining_config import PretrainingDataConfig
from bert_jax.models import config as model_config
from bert_jax.models import families
from bert_jax.parallel.mesh import MeshConfig
from bert_jax.tasks.distillation import DistillationConfig
from bert_jax.tasks.finetune_config import FinetuneDataConfig
from bert_jax.tasks.multitask.config import MultitaskDataConfig
from bert_jax.train.optimizer import OptimizerConfig
from bert_jax.train.settings import TrainerConfig

# Section name -> the settings dataclass declaring its keys (pretraining's data section).
SECTIONS = {
  "model": model_config.ModelConfig,
  "data": PretrainingDataConfig,
  "optimizer": OptimizerConfig,
  "mesh": MeshConfig,
  "distillation": DistillationConfig,  # task=distillation only.
}
# The sections a settings dataclass's `config_fields.sections_field` holds: the families' own.
_HELD_SECTIONS = {model_config.ModelConfig: families.SECTIONS}


# How a model is computed, not what it is: fine-tuning configs keep these set, not inherited.
_RUNTIME_MODEL_KEYS = ("dtype", "remat_policy", "scan_layers", "ffn_chunk_len", "lsh")


def base_config() -> ml_collections.ConfigDict:
  """The defaults: BERT-base pretraining as in the paper, on the embedded corpus."""
  config = config_fields.config_dict(TrainerConfig)
  for name, cls in SECTIONS.items():
    config[name] = config_fields.config_dict(cls, _HELD_SECTIONS.get(cls))
  # The size preset fills the placeholders num_layers / hidden_size / num_heads /
  # intermediate_size (`model_config_from_dict`); explicit keys win.
  config.model.size = model_config.DEFAULT_SIZE
  return config


def finetune_config(task: str) -> ml_collections.ConfigDict:
  """The fine-tuning defaults: `base_config` with the paper's fine-tuning recipe (batch 32,
  lr 2e-5, 3 epochs, 10% warmup, length 128) and the fine-tuning ``data`` section.

  Args:
    task: classification | tagging | span_qa | multiple_choice.
  """
  config = base_config()
  config.task = task
  # The model is init_from's: every architecture key (nested sections key by key) starts
  # unset and takes the value in init_from's config.json (train/inherited_model.py); without
  # init_from, BERT-base. A key set in a config or by --config.model.<key> (or
  # --config.model.<section>.<key>) wins and is checked against the checkpoint.
  for key in list(config.model):
    if key not in _RUNTIME_MODEL_KEYS:
      _unset(config.model, key)
  config.num_train_epochs = 3.0
  config.warmup_fraction = 0.1
  config.global_batch_size = 32
  config.log_every_steps = 50
  config.eval_every_steps = 1_000_000  # At the end only; lower it to follow the eval score.
  config.checkpoint_every_steps = 1000
  config.max_checkpoints_to_keep = 1
  config.optimizer.learning_rate = 2e-5
  config.data = config_fields.config_dict(FinetuneDataConfig)
  return config


def _unset(section: ml_collections.ConfigDict, key: str):
  """Makes ``section.key`` a typed placeholder; a nested section's keys each."""
  if isinstance(section[key], ml_collections.ConfigDict):
    for inner in list(section[key]):
      _unset(section[key], inner)
  else:
    section[key] = ml_collections.config_dict.placeholder(section.get_ref(key).get_type())


def multitask_config(members) -> ml_collections.ConfigDict:
  """The multi-task fine-tuning defaults: `finetune_config` with a multi-task ``data`` section.

  Args:
    members: [(name, task type, {data key: value})] of the member tasks, in order; each gets
      ``task``, ``weight`` 1.0 and every data key of a single-task run except the shared
      ``vocab_path`` / ``lowercase`` and ``test_path`` (multi-task runs predict no test file).
  """
  config = finetune_config(names.MULTITASK)
  template = config.data
  shared = config_fields.config_dict(MultitaskDataConfig)
  data = ml_collections.ConfigDict({k: v for k, v in shared.items() if k != "tasks"})
  data.tasks = ml_collections.ConfigDict()  # name -> {task, weight, that task's data keys}.
  for name, task, overrides in members:
    member = ml_collections.ConfigDict()
    member.task = task  # classification | tagging | span_qa.
    member.weight = 1.0  # Sampling weight (x train size, or size^(1/T)); 0 = eval only.
    for key, value in template.items():
      if key not in ("vocab_path", "lowercase", "test_path"):
        member[key] = value
    member.update(overrides)
    data.tasks[name] = member
  config.data = data
  return config


class KeyDescription(NamedTuple):
  """One config key: its dotted name, its default (as ``repr``) and its description."""

  key: str
  default: str
  description: str


def config_keys(fine_tuning: bool = False) -> Iterator[KeyDescription]:
  """Every config key with its default and description, sections dotted.

  Args:
    fine_tuning: the fine-tuning ``data`` section instead of pretraining's.
  """
  sections = {"": TrainerConfig, **SECTIONS}
  if fine_tuning:
    sections["data"] = FinetuneDataConfig
  for prefix, cls in sections.items():
    yield from _config_keys(cls, f"{prefix}." if prefix else "")
    if cls is model_config.ModelConfig:
      yield KeyDescription("model.size", repr(model_config.DEFAULT_SIZE), model_config.SIZE_HELP)


def _config_keys(cls, prefix: str) -> Iterator[KeyDescription]:
  for field in dataclasses.fields(cls):
    if field.metadata.get(config_fields.SECTIONS):
      for name, options in _HELD_SECTIONS[cls].items():
        yield from _config_keys(options, f"{prefix}{name}.")
    elif dataclasses.is_dataclass(field.default_factory):
      yield from _config_keys(field.default_factory, f"{prefix}{field.name}.")
    else:
      yield KeyDescription(
        f"{prefix}{field.name}", repr(field.default), config_fields.description(field)
      )


def describe(fine_tuning: bool = False) -> Iterator[str]:
  """Lines ``key = default  # description`` for every config key (`config_keys`)."""
  for entry in config_keys(fine_tuning):
    yield f"{entry.key} = {entry.default}  # {entry.description}"
