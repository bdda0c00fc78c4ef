"""The workdir layout (a contract, see docs/operations.md), named in one place.

  <workdir>/config.json          the resolved config of the run
  <workdir>/vocab.txt            the vocab of converted weights (runs name theirs in config.json)
  <workdir>/checkpoints/<step>/  Orbax checkpoints
  <workdir>/checkpoints.damaged/<step>/  checkpoints that did not restore, kept for inspection
  <workdir>/metrics.jsonl        one JSON object per logged step
  <workdir>/tensorboard/         TensorBoard event files
  <workdir>/profile/             profiler traces
  <workdir>/run.lock             the lock of the run that owns the workdir
  <workdir>/errors.log           tracebacks of failed background work (asynchronous saves)
  <workdir>/predictions/         fine-tuning prediction files (GLUE leaderboard TSVs, SQuAD
                                 predictions.json / nbest_predictions.json / null_odds.json)

Paths go through `etils.epath`, so a workdir may be local or on ``gs://``. This module only
names paths and reads small JSON files; writing checkpoints is `bert_jax.train`'s job.
"""

import dataclasses
import json
import os

from etils import epath

from bert_jax.errors import UserInputError

CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.txt"
CHECKPOINTS_DIR = "checkpoints"
DAMAGED_CHECKPOINTS_DIR = "checkpoints.damaged"
METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
PROFILE_DIR = "profile"
LOCK_FILE = "run.lock"
ERRORS_LOG = "errors.log"
PREDICTIONS_DIR = "predictions"
# The item of a checkpoint step that holds {"params", "opt_state", "step"} (or params only),
# plus "memory" for a causal LM with segment memory (data.objective='clm',
# model.recurrence.mem_len > 0).
STATE_ITEM = "state"


@dataclasses.dataclass(frozen=True)
class Workdir:
  """A run directory and the paths inside it.

  Attributes:
    path: the workdir itself.
  """

  path: epath.Path

  @classmethod
  def at(cls, path) -> "Workdir":
    return cls(epath.Path(path))

  @property
  def config_json(self) -> epath.Path:
    return self.path / CONFIG_FILE

  @property
  def vocab(self) -> epath.Path:
    return self.path / VOCAB_FILE

  @property
  def checkpoints(self) -> epath.Path:
    return self.path / CHECKPOINTS_DIR

  @property
  def damaged_checkpoints(self) -> epath.Path:
    return self.path / DAMAGED_CHECKPOINTS_DIR

  @property
  def metrics(self) -> epath.Path:
    return self.path / METRICS_FILE

  @property
  def tensorboard(self) -> epath.Path:
    return self.path / TENSORBOARD_DIR

  @property
  def profile(self) -> epath.Path:
    return self.path / PROFILE_DIR

  @property
  def lock(self) -> epath.Path:
    return self.path / LOCK_FILE

  @property
  def errors_log(self) -> epath.Path:
    return self.path / ERRORS_LOG

  @property
  def predictions(self) -> epath.Path:
    return self.path / PREDICTIONS_DIR

  def checkpoint(self, step: int) -> epath.Path:
    return self.checkpoints / str(step)

  def checkpoint_steps(self) -> list[int]:
    """The steps of ``checkpoints/<step>`` directories, ascending (finished or not)."""
    if not self.checkpoints.is_dir():
      return []
    return sorted(int(p.name) for p in self.checkpoints.iterdir() if p.name.isdigit())

  def has_checkpoints(self) -> bool:
    return bool(self.checkpoint_steps())

  def read_config(self) -> dict:
    """The parsed ``config.json``; {} if there is none."""
    if not self.config_json.exists():
      return {}
    try:
      return json.loads(self.config_json.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
      raise UserInputError(
        f"{self.config_json} is not valid JSON ({error}); restore it or use a new workdir"
      ) from None

  def resolve(self, relative_or_absolute: str) -> str:
    """A path stored in the workdir's config.json, made absolute against the workdir.

    Paths inside the workdir are stored relative to it so a workdir can be moved or copied.
    """
    if not relative_or_absolute:
      return relative_or_absolute
    path = epath.Path(relative_or_absolute)
    return str(path if path.is_absolute() or "://" in relative_or_absolute else self.path / path)

  def relative_paths(self, config):
    """``config`` (parsed JSON) with each path string inside the workdir made relative to it.

    `resolve` reads them back, so a workdir copied or moved elsewhere keeps working.
    """
    root = str(self.path) if "://" in str(self.path) else os.path.abspath(self.path)
    if isinstance(config, dict):
      return {key: self.relative_paths(value) for key, value in config.items()}
    if isinstance(config, list):
      return [self.relative_paths(value) for value in config]
    if isinstance(config, str) and config.startswith(root.rstrip("/") + "/"):
      return config[len(root.rstrip("/")) + 1 :]
    return config


def find_checkpoint(path, flag: str = "") -> epath.Path:
  """Resolves a workdir, its ``checkpoints/`` or one ``checkpoints/<step>`` to a step directory.

  Args:
    path: the directory the user named.
    flag: the config key or flag that named it, for the message ("init_from").

  Returns:
    The newest ``checkpoints/<step>`` directory (or ``path`` itself if it is one).

  Raises:
    UserInputError: there is no checkpoint there.
  """
  path = epath.Path(path)
  if (path / STATE_ITEM).exists():
    return path
  directory = path / CHECKPOINTS_DIR if (path / CHECKPOINTS_DIR).exists() else path
  steps = (
    sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())
    if (directory.is_dir())
    else []
  )
  if not steps:
    raise UserInputError(
      f"{flag + '=' if flag else ''}{path} holds no checkpoint; point it at a workdir, its "
      "checkpoints/ directory or one checkpoints/<step> directory"
    )
  return directory / str(steps[-1])


def of_checkpoint(step_dir) -> Workdir:
  """The workdir a ``checkpoints/<step>`` directory belongs to."""
  return Workdir(epath.Path(step_dir).parent.parent)


class InitFromChain:
  """The runs an ``init_from`` leads to, nearest first, each config.json read once.

  What ``init_from`` gives a run comes from here: its model section (the first run's), its
  casing and vocab (the first run that records them; a model fine-tuned twice keeps its
  pretraining vocab). The chain follows each run's own ``init_from`` (paths stored relative to
  a workdir are read so) and is read lazily: a run is read only when an answer needs it. It
  ends at a run without config.json or one already seen.
  """

  def __init__(self, init_from: str):
    self._next = str(init_from or "")
    self._runs: list[tuple[Workdir, dict]] = []
    self._seen: set = set()

  @classmethod
  def of(cls, init_from) -> "InitFromChain":
    """``init_from`` itself if it is a chain already read (or being read), else its chain."""
    return init_from if isinstance(init_from, cls) else cls(init_from)

  def __iter__(self):
    """Yields (Workdir, its config.json as a dict, {} without one), nearest first.

    Raises:
      UserInputError: ``init_from`` (or one it leads to) holds no checkpoint.
    """
    index = 0
    while True:
      if index == len(self._runs) and not self._extend():
        return
      yield self._runs[index]
      index += 1

  def _extend(self) -> bool:
    """Reads the next run of the chain; False at its end."""
    if not self._next:
      return False
    run = of_checkpoint(find_checkpoint(self._next, flag="init_from"))
    self._next = ""
    if run.path in self._seen:
      return False
    self._seen.add(run.path)
    config = run.read_config()
    self._runs.append((run, config))
    if config:
      self._next = run.resolve(config.get("init_from", ""))
    return True

  def first(self) -> tuple["Workdir | None", dict]:
    """(the run ``init_from`` names, its config.json) or (None, {}) without ``init_from``."""
    return next(iter(self), (None, {}))
