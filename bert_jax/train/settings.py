"""The config boundary: a ConfigDict becomes frozen dataclasses once, validated across sections.

Nothing below this module reads the ConfigDict; each component gets only its own slice.
"""

import dataclasses
import math
from typing import Any

import ml_collections

from bert_jax import names
from bert_jax import workdir as workdir_lib
from bert_jax.config_fields import from_section, option
from bert_jax.data.pretraining_config import PretrainingDataConfig
from bert_jax.errors import UserInputError
from bert_jax.models.attention import kinds as attention_kinds
from bert_jax.models.config import ModelConfig
from bert_jax.models.families import model_config_from_dict
from bert_jax.parallel.mesh import MeshConfig
from bert_jax.tasks import registry
from bert_jax.tasks.distillation import DistillationConfig
from bert_jax.tasks.finetune_config import FinetuneDataConfig
from bert_jax.tasks.multitask.config import MultitaskDataConfig
from bert_jax.tasks.task_settings import DataConfig, TaskSettings
from bert_jax.train import validation
from bert_jax.train.inherited_model import resolve_model_section
from bert_jax.train.optimizer import OptimizerConfig


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
  """Top-level keys of the config: what the train loop itself needs."""

  task: str = option(names.PRETRAINING, help=f"What main runs: {' | '.join(names.TASKS)}.")
  seed: int = option(0, help="Params init, dropout and data order all derive from it.")
  num_train_steps: int = option(1_000_000, help="Optimizer updates.")
  num_train_epochs: float = option(
    0.0, help="Fine-tuning: > 0 replaces num_train_steps by ceil(epochs * train examples / batch)."
  )
  warmup_fraction: float = option(
    0.0, help="> 0 replaces optimizer.warmup_steps by round(warmup_fraction * num_train_steps)."
  )
  global_batch_size: int = option(256, help="Sequences per update, over all hosts and devices.")
  gradient_accumulation_steps: int = option(
    1, help="Micro-batches per update (the same update, less memory)."
  )
  log_every_steps: int = option(
    100, help="Train metrics to the console, metrics.jsonl and TensorBoard."
  )
  eval_every_steps: int = option(10_000, help="Eval over the held-out split (and at the end).")
  checkpoint_every_steps: int = option(
    10_000, help="Orbax save interval (and at the end / on SIGTERM)."
  )
  max_checkpoints_to_keep: int = option(3, help="Older checkpoints are deleted.")
  init_from: str = option(
    "", help="Fine-tuning: a workdir, checkpoint or converted weights to take the encoder from."
  )
  freeze_encoder: bool = option(
    False, help="Fine-tuning: train the task head only; the trunk stays as restored."
  )
  peak_flops_per_device: float = option(
    0.0, help="For MFU; 0 = from the device kind (measured on CPU)."
  )
  profile_start_step: int = option(
    10, help="Profiler trace (process 0) into <workdir>/profile from this state.step on."
  )
  profile_num_steps: int = option(0, help="Updates the profiler traces; 0 = no trace.")
  lock_lease_secs: float = option(
    300.0,
    help="Lease of <workdir>/run.lock, renewed while the run lives; a lock not renewed for "
    "this long (a run that died on another host) is taken over.",
  )
  compilation_cache_dir: str = option(
    "compilation_cache",
    help="Persistent XLA compilation cache, relative to the workdir or absolute (gs:// too); "
    "a restarted run loads its compiled programs instead of recompiling; empty = off.",
  )


@dataclasses.dataclass(frozen=True)
class RunSettings:
  trainer: TrainerConfig
  model: ModelConfig
  data: DataConfig
  optimizer: OptimizerConfig
  mesh: MeshConfig
  distillation: DistillationConfig = DistillationConfig()

  @property
  def task_settings(self) -> TaskSettings:
    """The slice that picks and builds the task and its data (`tasks.registry`)."""
    return TaskSettings(
      task=self.trainer.task,
      model=self.model,
      data=self.data,
      global_batch_size=self.trainer.global_batch_size,
      init_from=self.trainer.init_from,
      distillation=self.distillation,
    )


def _plain(value: Any):
  if isinstance(value, (ml_collections.ConfigDict, ml_collections.FrozenConfigDict)):
    return {k: _plain(v) for k, v in value.items()}
  if isinstance(value, list):
    return tuple(_plain(v) for v in value)
  return value


def settings_from_config(
  config: ml_collections.ConfigDict, workdir: str | None = None
) -> RunSettings:
  """Converts and validates the whole config; raises `UserInputError` on the first problem.

  Args:
    config: the experiment config.
    workdir: the run's workdir; model keys the config leaves unset come from its config.json
      when it holds checkpoints (resume), else from ``init_from``'s (see `inherited_model`).
  """
  values = _plain(config)
  task = values.get("task", TrainerConfig.task)
  if task not in names.TASKS:
    raise UserInputError(f"task={task!r} is unknown; choose one of {', '.join(names.TASKS)}")
  # What init_from gives the run (its model keys, casing, vocab): each config.json along its
  # chain is read once, here.
  init_from = workdir_lib.InitFromChain(values.get("init_from", ""))
  model_section = resolve_model_section(dict(values.pop("model", {})), init_from, workdir)
  model = model_config_from_dict(model_section)
  data_class = PretrainingDataConfig if task in names.PRETRAINING_DATA_TASKS else FinetuneDataConfig
  if task == names.MULTITASK:
    data_class = MultitaskDataConfig  # Members' data sections inside (tasks/multitask/).
  data_values = dict(values.pop("data", {}))
  if data_class is FinetuneDataConfig:
    # Unset (fine-tuning configs leave them so): the casing and vocab of the model init_from
    # holds.
    data_values["lowercase"] = registry.resolve_lowercase(data_values.get("lowercase"), init_from)
    data_values["vocab_path"] = registry.resolve_vocab_path(
      data_values.get("vocab_path", ""), init_from
    )
  data = from_section(data_class, data_values, "data")
  optimizer = from_section(OptimizerConfig, dict(values.pop("optimizer", {})), "optimizer")
  mesh = from_section(MeshConfig, dict(values.pop("mesh", {})), "mesh")
  distillation = from_section(
    DistillationConfig, dict(values.pop("distillation", {})), "distillation"
  )
  trainer = from_section(TrainerConfig, values, "top-level")
  _check_consistency(trainer, model, data)
  settings = RunSettings(
    trainer=trainer,
    model=model,
    data=data,
    optimizer=optimizer,
    mesh=mesh,
    distillation=distillation,
  )
  validation.check_ranges(settings)
  return settings


def _check_consistency(trainer: TrainerConfig, model: ModelConfig, data):
  if data.max_seq_length > model.max_position_embeddings:
    raise UserInputError(
      f"data.max_seq_length={data.max_seq_length} exceeds model.max_position_embeddings="
      f"{model.max_position_embeddings}; shorten the sequences or add position embeddings"
    )
  attention = attention_kinds.get(model.attention_kind)
  if attention.masks_by_length and getattr(data, "packing", None) == "full_sentences":
    raise UserInputError(
      f"model.attention_kind={attention.name!r} masks by sequence length and cannot keep the "
      "documents of data.packing='full_sentences' apart; use model.attention_kind='auto' or "
      "'dense'"
    )
  chunk_len = model.lsh.chunk_len
  if attention.chunked and data.max_seq_length % chunk_len:
    raise UserInputError(
      f"data.max_seq_length={data.max_seq_length} is not a multiple of model.lsh.chunk_len="
      f"{chunk_len} (attention_kind={model.attention_kind!r} needs whole chunks); use e.g. "
      f"{-(-data.max_seq_length // chunk_len) * chunk_len}"
    )
  if (
    trainer.task in names.PRETRAINING_DATA_TASKS
    and data.objective != names.CLM
    and data.max_predictions_per_seq > data.max_seq_length
  ):
    raise UserInputError(
      f"data.max_predictions_per_seq={data.max_predictions_per_seq} exceeds "
      f"data.max_seq_length={data.max_seq_length}"
    )
  if getattr(data, "objective", None) == names.CLM and trainer.task != names.PRETRAINING:
    raise UserInputError(
      f"data.objective='clm' is a pretraining objective; task={trainer.task!r} cannot train "
      "it: set task='pretraining' or another data.objective"
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
  if trainer.num_train_epochs and trainer.task in names.PRETRAINING_DATA_TASKS:
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
