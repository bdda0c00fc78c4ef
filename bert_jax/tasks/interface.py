"""What the trainer, its steps and the tools ask of a task: `Task` and its capabilities.

Every task object (`registry.make_task`'s result) satisfies `Task`. What only some tasks do is
still a member of `Task`, with the answer of a task that does not do it in `TaskDefaults`:

  predicts          True: evaluation collects `PredictingTask.predictions` per row and the
                    data object scores them and writes the prediction files (fine-tuning)
  mem_len           > 0: the train state carries segment memory (`RecurrentTask`)
  eval_mem_len      > 0: evaluation carries its own memory from batch to batch
  teacher           the frozen model a distillation step also runs forward, else None
  checkpoint_record facts a resume must match (a causal LM's streams), else None

The methods behind a capability are typed by its sub-protocol (`PredictingTask`,
`RecurrentTask`); `RandomBatchTask` is a task that makes random batches (the pretraining
objectives, for benchmarks and compile checks).

A task's data object (`registry.make_data`'s result) satisfies `TaskData`: resumable host
batches of each split. The data of a predicting task satisfies `PredictingData` too: it scores
the collected eval predictions and writes the prediction files. `check_data` refuses a data
object that lacks what the trainer will ask of it, before anything is compiled.
"""

from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

import numpy as np

from bert_jax.models.config import ModelConfig

Batch = dict[str, Any]  # Feature name -> array [B, ...] (numpy on the host, jax in a step).


class TaskModel(Protocol):
  """A Flax model as a task hands it out (a linen Module, or a wrapper with its methods)."""

  def init(self, rngs, *inputs, **kwargs) -> dict:
    """The variables of a model called on ``inputs``."""

  def apply(self, variables, *inputs, **kwargs) -> Any:
    """The model's outputs on ``inputs``."""


class FrozenModel(Protocol):
  """A model that a train step runs forward only (a distillation teacher)."""

  @property
  def model(self) -> ModelConfig:
    """Its architecture."""


@runtime_checkable
class Task(Protocol):
  """An objective on the one trainer: batch schema, model, loss, metrics and capabilities."""

  predicts: bool
  mem_len: int
  eval_mem_len: int
  teacher: FrozenModel | None

  def example_batch(self, batch_size: int) -> dict[str, np.ndarray]:
    """A zero-filled host batch with the data's schema (shapes and dtypes)."""

  def model(self, deterministic: bool) -> TaskModel:
    """The model the step trains (dropout off when ``deterministic``)."""

  def model_inputs(self, batch: Batch) -> tuple:
    """The model's positional inputs from ``batch``."""

  def denominators(self, batch: Batch) -> dict:
    """Normalisers of the whole global batch (computed once, before micro-batching)."""

  def loss_and_sums(self, outputs, batch: Batch, denominators: dict) -> tuple[Any, dict]:
    """(loss to differentiate, already normalised; metric sums) of one (micro-)batch."""

  def metrics_from_sums(self, sums: dict) -> dict[str, float]:
    """Host-side metrics (``loss`` among them) from sums accumulated over steps or splits."""

  def checkpoint_record(self, batch_size: int) -> dict | None:
    """JSON-able facts every checkpoint records and a resume must match; None if none."""


@runtime_checkable
class PredictingTask(Task, Protocol):
  """A task with ``predicts``: per-row outputs that its data object scores and writes."""

  def predictions(self, outputs, batch: Batch) -> dict:
    """Per-row predictions {name: array [B, ...]} of a batch."""


@runtime_checkable
class RecurrentTask(Task, Protocol):
  """A task over streams of segments whose model attends to the previous segments' memory."""

  segment_len: int

  def model(self, deterministic: bool, mem_len: int | None = None) -> TaskModel:
    """The model; ``mem_len`` (default: training's) sizes the memory it leaves."""

  def init_memory(self, batch_size: int, mem_len: int) -> Any:
    """The empty memory before the first segment, boxed with its logical axes."""

  def memory_inputs(self, memory) -> dict:
    """The model's keyword arguments for ``memory``."""

  def next_memory(self, outputs, memory) -> Any:
    """The memory a step leaves, in the dtypes of the one it read."""


@runtime_checkable
class RandomBatchTask(Task, Protocol):
  """A task that makes random batches of its schema (benchmarks and step-level tests)."""

  def random_batch(self, batch_size: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A random host batch with padding, the same keys, shapes and dtypes as example_batch."""


class TaskDefaults:
  """The capabilities' answers for a task without them: no predictions, no memory, no teacher,
  nothing a resume must match. A task subclasses this and overrides what it does.

  A dataclass task that has a ``teacher`` field declares it with ``dataclasses.field()``: the
  class attribute here would otherwise become its default.
  """

  predicts = False
  mem_len = 0
  eval_mem_len = 0
  teacher = None

  def checkpoint_record(self, batch_size: int) -> dict | None:
    del batch_size
    return None


class BatchIterator(Protocol):
  """Host batches of one split, with the position a checkpoint records."""

  position: int  # Global rows consumed: the ``start_position`` that continues exactly here.

  def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
    """Itself."""

  def __next__(self) -> dict[str, np.ndarray]:
    """This process's share of the next global batch."""


@runtime_checkable
class TaskData(Protocol):
  """What the trainer asks of every task's data object."""

  def batches(
    self, *, split, seed, global_batch_size, process_index=0, process_count=1, start_position=0
  ) -> BatchIterator:
    """This process's share of the global batches of ``split`` from ``start_position``."""


@runtime_checkable
class PredictingData(TaskData, Protocol):
  """The data object of a task with ``predicts``: epochs, scores and prediction files."""

  num_train_examples: int  # Rows of one epoch (``num_train_epochs`` counts these).
  test_arrays: dict | None  # The unlabelled test split's features, or None: no test split.

  def evaluate(self, predictions: dict) -> tuple[dict, dict]:
    """({metric: value}, {prediction file: text}) from every eval row's predictions."""

  def test_prediction_files(self, predictions: dict) -> dict:
    """{prediction file: text} of the test split's predictions."""


def check_data(task: Task, data: Any) -> None:
  """Refuses a data object that lacks what the trainer asks of ``task``'s data.

  Raises:
    TypeError: ``data`` is not a `TaskData` (or a `PredictingData` for a predicting task);
      the message names the missing members.
  """
  protocol = PredictingData if task.predicts else TaskData
  if isinstance(data, protocol):
    return
  missing = [name for name in _members(protocol) if not hasattr(data, name)]
  raise TypeError(
    f"{type(data).__name__} is not a {protocol.__name__} (tasks/interface.py): it has no "
    f"{', '.join(missing)}"
  )


def _members(protocol) -> list[str]:
  """The attributes and methods ``protocol`` and its protocol bases declare, own ones first."""
  members = []
  for cls in protocol.__mro__:
    if cls is Protocol or not getattr(cls, "_is_protocol", False):
      continue
    declared = [*cls.__dict__.get("__annotations__", {})]
    declared += [n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")]
    members += [name for name in declared if name not in members]
  return members
