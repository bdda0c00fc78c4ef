"""The slice of a run's settings that picks a task and builds its objective and its data."""

import dataclasses

from bert_jax.data.pretraining_config import PretrainingDataConfig
from bert_jax.models.config import ModelConfig
from bert_jax.tasks.distillation import DistillationConfig
from bert_jax.tasks.finetune_config import FinetuneDataConfig
from bert_jax.tasks.multitask.config import MultitaskDataConfig

# The ``data`` section: pretraining's for the tasks that read the corpus, else the fine-tuning
# task's, or the members' of a multi-task run.
DataConfig = PretrainingDataConfig | FinetuneDataConfig | MultitaskDataConfig


@dataclasses.dataclass(frozen=True)
class TaskSettings:
  """What `registry.make_task` and `registry.make_data` read (`RunSettings.task_settings`).

  Attributes:
    task: ``config.task``, one of `bert_jax.names.TASKS`.
    model: the ``model`` section.
    data: the ``data`` section of that task.
    global_batch_size: sequences per update (a causal LM's streams are its rows).
    init_from: the run's ``init_from`` (a fine-tuning run's vocab may come from there).
    distillation: the ``distillation`` section (``task=distillation`` reads it).
  """

  task: str
  model: ModelConfig
  data: DataConfig
  global_batch_size: int
  init_from: str = ""
  distillation: DistillationConfig = DistillationConfig()
