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
"""

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
