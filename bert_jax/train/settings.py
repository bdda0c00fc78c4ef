"""The config boundary: a ConfigDict becomes frozen dataclasses once, validated across sections.

Nothing below this module reads the ConfigDict; each component gets only its own slice.
"""

import dataclasses
import math
from typing import Any

import ml_collections

from bert_jax.data.pretraining_pipeline import PretrainingDataConfig
from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig, model_config_from_dict
from bert_jax.parallel.mesh import MeshConfig
from bert_jax.tasks.finetune_config import FinetuneDataConfig
from bert_jax.tasks.multitask.config import MultitaskDataConfig
from bert_jax.train.optimizer import OptimizerConfig

TASKS = ("pretraining", "classification", "tagging", "span_qa", "multiple_choice", "multitask")


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
  """Top-level keys of the config: what the train loop itself needs."""

  task: str = "pretraining"
  seed: int = 0
  num_train_steps: int = 1000
  # > 0: num_train_steps = ceil(epochs * train examples / global_batch_size) (fine-tuning).
  num_train_epochs: float = 0.0
  # > 0: optimizer.warmup_steps = round(warmup_fraction * num_train_steps).
  warmup_fraction: float = 0.0
  global_batch_size: int = 32
  gradient_accumulation_steps: int = 1
  log_every_steps: int = 50
  eval_every_steps: int = 500
  checkpoint_every_steps: int = 500
  max_checkpoints_to_keep: int = 3
  init_from: str = ""
  freeze_encoder: bool = False  # Train only the task head; the "bert" trunk stays as restored.
  peak_flops_per_device: float = 0.0
  profile_start_step: int = 10  # Profiler trace from this state.step (train/profiling.py) ...
  profile_num_steps: int = 0  # ... for this many updates; 0 = no trace.


@dataclasses.dataclass(frozen=True)
class RunSettings:
  trainer: TrainerConfig
  model: ModelConfig
  data: PretrainingDataConfig | FinetuneDataConfig | MultitaskDataConfig
  optimizer: OptimizerConfig
  mesh: MeshConfig


def _section(cls, values: dict, section: str):
  known = {f.name for f in dataclasses.fields(cls)}
  unknown = sorted(set(values) - known)
  if unknown:
    raise UserInputError(f"unknown {section} config keys {unknown}; valid keys: {sorted(known)}")
  return cls(**values)


def _plain(value: Any):
  if isinstance(value, (ml_collections.ConfigDict, ml_collections.FrozenConfigDict)):
    return {k: _plain(v) for k, v in value.items()}
  if isinstance(value, list):
    return tuple(_plain(v) for v in value)
  return value


def settings_from_config(config: ml_collections.ConfigDict) -> RunSettings:
  """Converts and validates the whole config; raises `UserInputError` on the first problem."""
  values = _plain(config)
  task = values.get("task", TrainerConfig.task)
  if task not in TASKS:
    raise UserInputError(f"task={task!r} is unknown; choose one of {', '.join(TASKS)}")
  model = model_config_from_dict(values.pop("model", {}))
  data_class = PretrainingDataConfig if task == "pretraining" else FinetuneDataConfig
  if task == "multitask":
    data_class = MultitaskDataConfig  # Members' data sections inside (tasks/multitask/).
  data = _section(data_class, dict(values.pop("data", {})), "data")
  optimizer = _section(OptimizerConfig, dict(values.pop("optimizer", {})), "optimizer")
  mesh = _section(MeshConfig, dict(values.pop("mesh", {})), "mesh")
  trainer = _section(TrainerConfig, values, "top-level")
  _check_consistency(trainer, model, data)
  return RunSettings(trainer=trainer, model=model, data=data, optimizer=optimizer, mesh=mesh)


def _check_consistency(trainer: TrainerConfig, model: ModelConfig, data):
  if data.max_seq_length > model.max_position_embeddings:
    raise UserInputError(
      f"data.max_seq_length={data.max_seq_length} exceeds model.max_position_embeddings="
      f"{model.max_position_embeddings}; shorten the sequences or add position embeddings"
    )
  chunk_len = model.lsh.chunk_len
  if model.attention_kind in ("lsh", "local") and data.max_seq_length % chunk_len:
    raise UserInputError(
      f"data.max_seq_length={data.max_seq_length} is not a multiple of model.lsh.chunk_len="
      f"{chunk_len} (attention_kind={model.attention_kind!r} needs whole chunks); use e.g. "
      f"{-(-data.max_seq_length // chunk_len) * chunk_len}"
    )
  if trainer.task == "pretraining" and data.max_predictions_per_seq > data.max_seq_length:
    raise UserInputError(
      f"data.max_predictions_per_seq={data.max_predictions_per_seq} exceeds "
      f"data.max_seq_length={data.max_seq_length}"
    )
  if trainer.global_batch_size % trainer.gradient_accumulation_steps:
    raise UserInputError(
      f"global_batch_size={trainer.global_batch_size} is not divisible by "
      f"gradient_accumulation_steps={trainer.gradient_accumulation_steps}"
    )
  for key in (
    "num_train_steps",
    "global_batch_size",
    "log_every_steps",
    "eval_every_steps",
    "checkpoint_every_steps",
    "gradient_accumulation_steps",
  ):
    if getattr(trainer, key) < 1:
      raise UserInputError(f"{key}={getattr(trainer, key)} must be at least 1")
  if trainer.num_train_epochs < 0 or not 0 <= trainer.warmup_fraction < 1:
    raise UserInputError(
      f"num_train_epochs={trainer.num_train_epochs} must be >= 0 (0 = num_train_steps) and "
      f"warmup_fraction={trainer.warmup_fraction} in [0, 1) (BERT fine-tuning: 3 and 0.1)"
    )
  if trainer.num_train_epochs and trainer.task == "pretraining":
    raise UserInputError(
      "num_train_epochs is for fine-tuning tasks; pretraining counts "
      "num_train_steps (set num_train_epochs=0)"
    )
  if trainer.freeze_encoder and not trainer.init_from:
    raise UserInputError(
      "freeze_encoder=True keeps the encoder as restored, but init_from is "
      "empty; set init_from to a pretrained workdir or converted weights"
    )


def resolve_train_steps(settings: RunSettings, num_train_examples: int) -> RunSettings:
  """Settings with the step counts that epochs and the warmup fraction stand for.

  Args:
    settings: the run settings.
    num_train_examples: rows in one epoch of the train split (the data object's
      ``num_train_examples``); unused unless ``num_train_epochs`` > 0.

  Returns:
    ``settings`` with ``num_train_steps`` = ceil(epochs * examples / global batch) when
    ``num_train_epochs`` > 0, and ``optimizer.warmup_steps`` = round(fraction * steps) when
    ``warmup_fraction`` > 0; unchanged otherwise.
  """
  trainer, optimizer = settings.trainer, settings.optimizer
  if trainer.num_train_epochs > 0:
    steps = math.ceil(trainer.num_train_epochs * num_train_examples / trainer.global_batch_size)
    trainer = dataclasses.replace(trainer, num_train_steps=max(steps, 1))
  if trainer.warmup_fraction > 0:
    optimizer = dataclasses.replace(
      optimizer, warmup_steps=round(trainer.warmup_fraction * trainer.num_train_steps)
    )
  return dataclasses.replace(settings, trainer=trainer, optimizer=optimizer)


def check_batch_fits_mesh(trainer: TrainerConfig, data_parallel_size: int, process_count: int):
  """The (micro-)batch must split evenly over data-parallel devices and over hosts."""
  micro_batch = trainer.global_batch_size // trainer.gradient_accumulation_steps
  step = math.lcm(data_parallel_size * trainer.gradient_accumulation_steps, process_count)
  valid = f"valid global_batch_size values: multiples of {step} ({step}, {2 * step}, ...)"
  if micro_batch % data_parallel_size:
    raise UserInputError(
      f"global_batch_size / gradient_accumulation_steps = {micro_batch} does not divide over "
      f"the {data_parallel_size} data-parallel devices (mesh data x fsdp); {valid}"
    )
  if trainer.global_batch_size % process_count:
    raise UserInputError(
      f"global_batch_size={trainer.global_batch_size} does not divide over "
      f"{process_count} processes; {valid}"
    )
