"""The encoder every fine-tuning task model is built on, chosen in this one place.

Parameter names: the trunk is always ``bert/...`` (`bert_jax.train.init_from` restores it from
pretraining checkpoints by that name); the task heads are the other top-level names.
"""

from bert_jax.models.bert import BertEncoder
from bert_jax.models.config import ModelConfig

NAME = "bert"


def trunk(config: ModelConfig, deterministic: bool):
  """The encoder module: called on (ids, token types, mask), gives (sequence [B, L, D],
  pooled [B, D]). Create it inside a task model's compact ``__call__``."""
  return BertEncoder(config, deterministic, name=NAME)
