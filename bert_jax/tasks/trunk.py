"""The encoder every fine-tuning task model is built on: the one of ``model.family``.

Parameter names: the trunk is always ``bert/...`` (`bert_jax.train.init_from` restores it from
pretraining checkpoints by that name); the task heads are the other top-level names.
"""

from bert_jax.models import families
from bert_jax.models.config import ModelConfig

NAME = "bert"


def trunk(config: ModelConfig, deterministic: bool):
  """The encoder module: called on (ids, token types, mask), gives (sequence [B, L, D],
  pooled [B, D]). Create it inside a task model's compact ``__call__``."""
  return families.get(config.family).encoder(config, deterministic, name=NAME)
