"""The ``data`` section of a multi-task run: the member tasks and how train steps sample them.

  data.sampling        proportional | temperature | round_robin
  data.temperature     T of temperature sampling
  data.vocab_path      the shared encoder's vocab (as a single-task run's data.vocab_path)
  data.lowercase       uncased tokenisation
  data.tasks.<name>    one member: its ``task`` type, sampling ``weight`` and the data keys of
                       that task type (`bert_jax.tasks.finetune_config.FinetuneDataConfig`)

A member's name keys its parameters (``<name>/<head>``), its metrics (``<name>/accuracy``) and
its prediction files (``predictions/<name>/``).
"""

import dataclasses
import re

from bert_jax import names
from bert_jax.config_fields import option
from bert_jax.errors import UserInputError
from bert_jax.tasks import trunk
from bert_jax.tasks.finetune_config import FinetuneDataConfig

# Task types a member may have: one [B, L] sequence per row, so members share a batch schema.
MEMBER_TASKS = (names.CLASSIFICATION, names.TAGGING, names.SPAN_QA)
SAMPLINGS = ("proportional", "temperature", "round_robin")
# Member keys that are not data keys of its task type.
_MEMBER_KEYS = ("task", "weight")
# Data keys every member shares (one encoder, one vocab): the data section's own keys.
_SHARED_KEYS = ("vocab_path", "lowercase")
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclasses.dataclass(frozen=True)
class MemberConfig:
  """One member task of a multi-task run.

  Attributes:
    name: its key under ``data.tasks``.
    task: its task type (`MEMBER_TASKS`).
    weight: its sampling weight (>= 0; 0 = evaluated but never trained on).
    data: its data section, as the single-task run of ``task`` would have it.
  """

  name: str
  task: str
  weight: float
  data: FinetuneDataConfig


def _member(name: str, values: dict, vocab_path: str, lowercase: bool) -> MemberConfig:
  where = f"data.tasks.{name}"
  if not _NAME.match(name) or name == trunk.NAME:
    raise UserInputError(
      f"{where}: task name {name!r} must be letters, digits, '_', '-' or '.' and not "
      f"{trunk.NAME!r} (it names the member's head, metrics and prediction files)"
    )
  if not isinstance(values, dict):
    raise UserInputError(f"{where} must be a section with task, weight and data keys")
  values = dict(values)
  task = values.pop("task", "")
  if task not in MEMBER_TASKS:
    raise UserInputError(
      f"{where}.task={task!r} is not a task type multitask can train; choose one of "
      f"{', '.join(MEMBER_TASKS)}"
    )
  weight = values.pop("weight", 1.0)
  if not isinstance(weight, (int, float)) or weight < 0:
    raise UserInputError(
      f"{where}.weight={weight!r} must be a number >= 0 (its share in sampling; 0 = eval only)"
    )
  known = {f.name for f in dataclasses.fields(FinetuneDataConfig)} - set(_SHARED_KEYS)
  unknown = sorted(set(values) - known)
  if unknown:
    raise UserInputError(
      f"unknown {where} keys {unknown}; valid keys: {sorted(known | set(_MEMBER_KEYS))} "
      f"(vocab_path and lowercase are data.* keys shared by every member)"
    )
  if values.get("test_path"):
    raise UserInputError(
      f"{where}.test_path is set but multitask writes no test predictions; export the task "
      "(python -m bert_jax.tools.export_task) and predict with its single-task config"
    )
  try:
    data = FinetuneDataConfig(**values, vocab_path=vocab_path, lowercase=lowercase)
  except UserInputError as error:
    raise UserInputError(f"{where}: {error}") from None
  return MemberConfig(name, task, float(weight), data)


@dataclasses.dataclass(frozen=True)
class MultitaskDataConfig:
  """The member tasks of a multi-task run and how its train steps sample them.

  Attributes:
    tasks: {name: {"task": type, "weight": w, data keys...}} as configured; held as a tuple
      of `MemberConfig` in name order (a member's ``task_id`` is its index there).
    sampling: which member each train step draws its batch from (see `sampling`).
    temperature: temperature sampling's T (1 = proportional; large = uniform).
    vocab_path: the vocab every member tokenises with (empty: as a single-task run).
    lowercase: uncased tokenisation.
  """

  tasks: tuple = option(
    (), help="member tasks: {name: {task, weight, data keys of that task type}}"
  )
  sampling: str = option(
    "proportional",
    help="proportional (to train size x weight) | temperature (size^(1/T) x weight) | "
    "round_robin (one batch of each member with weight > 0 in turn, in name order)",
  )
  temperature: float = option(2.0, help="T of temperature sampling (1 = proportional)")
  vocab_path: str = option("", help="shared vocab; empty = init_from's, else the embedded one")
  lowercase: bool = option(True, help="uncased tokenisation (lowercase, strip accents)")

  def __post_init__(self):
    tasks = self.tasks
    if isinstance(tasks, dict):
      # Name order: config.json stores sections with sorted keys, so a run, its resume and
      # its exports agree on the members' order (their task ids and the schedule).
      tasks = tuple(
        _member(name, tasks[name], self.vocab_path, self.lowercase) for name in sorted(tasks)
      )
    if not tasks:
      raise UserInputError(
        "data.tasks is empty; list the member tasks, e.g. "
        "--config=configs/finetune/multitask.py:mrpc,rte"
      )
    object.__setattr__(self, "tasks", tuple(tasks))
    if self.sampling not in SAMPLINGS:
      raise UserInputError(
        f"data.sampling={self.sampling!r} is unknown; choose one of {', '.join(SAMPLINGS)}"
      )
    if not self.temperature > 0:
      raise UserInputError(f"data.temperature={self.temperature} must be > 0 (e.g. 2)")
    if not any(member.weight > 0 for member in self.tasks):
      raise UserInputError(
        "every data.tasks.*.weight is 0, so no task would be trained; give one a weight > 0"
      )

  @property
  def max_seq_length(self) -> int:
    """The longest member sequence (the shared batch's length)."""
    return max(member.data.max_seq_length for member in self.tasks)

  @property
  def test_path(self) -> str:
    """Multi-task runs predict no test file (members refuse ``test_path``)."""
    return ""

  def member(self, name: str) -> MemberConfig:
    """The member called ``name``; a UserInputError naming the members otherwise."""
    for member in self.tasks:
      if member.name == name:
        return member
    raise UserInputError(
      f"no task {name!r} in this multi-task run; its tasks: {', '.join(m.name for m in self.tasks)}"
    )
