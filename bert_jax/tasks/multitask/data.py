"""The data of a multi-task run: every member's own data object, batched under one schema.

Every batch holds one member's rows (MT-DNN's per-batch task sampling) in the union schema:

* ``input_ids``, ``token_type_ids``, ``input_mask`` [B, L] with L the longest member's length
  (shorter members' rows are zero-padded; the model cuts them back to their own length);
* ``example_weight``, ``row_id`` [B] as in every fine-tuning batch;
* ``task_id`` [B]: the member's index, the same in every row;
* ``<name>/<key>`` for every other feature of every member (its labels, ...): the batch's
  member's values, zeros for the other members.

Train batches follow `sampling.Schedule`: step k takes the next batch of member
``schedule.task_at(k)`` from that member's own endless sequence (the shared fine-tuning
contract, `bert_jax.tasks.feature_batches`). The position is the run's global rows consumed
(k x B); each member's position is recomputed from the schedule, so a resumed run continues
exactly. Eval batches run through the members in order; row ids are offset so they number
every member's eval rows once, and `evaluate` hands each member its own rows.
"""

import numpy as np

from bert_jax.errors import UserInputError
from bert_jax.tasks.multitask import members, sampling
from bert_jax.tasks.multitask.config import MultitaskDataConfig

ENCODER_KEYS = ("input_ids", "token_type_ids", "input_mask")
ROW_KEYS = ("example_weight", "row_id")
TASK_ID = "task_id"


def member_key(name: str, key: str) -> str:
  """A member's own feature (or metric, or prediction) in the shared namespace."""
  return f"{name}/{key}"


def member_items(name: str, mapping) -> dict:
  """``mapping``'s ``<name>/<key>`` entries, as {key: value}."""
  prefix = member_key(name, "")
  return {k[len(prefix) :]: v for k, v in mapping.items() if k.startswith(prefix)}


class MultitaskData:
  """Members' data objects, batched as one multi-task run's train and eval batches.

  Attributes:
    config: the run's `MultitaskDataConfig`.
    members: each member's data object (`bert_jax.tasks.feature_batches.FeatureData`), in the
      configured order.
    test_arrays: None: multi-task runs predict no test file.
  """

  test_arrays = None

  def __init__(self, config: MultitaskDataConfig, member_data):
    self.config = config
    self.members = tuple(member_data)
    self.names = tuple(member.name for member in config.tasks)
    self.max_seq_length = config.max_seq_length
    # Each member's feature shapes beyond the row, and dtypes (zeros for others' batches).
    self._schemas = tuple(
      {k: (v.shape[1:], v.dtype) for k, v in data.train_arrays.items() if k not in ENCODER_KEYS}
      for data in self.members
    )
    self.shares = sampling.probabilities(
      [data.num_train_examples for data in self.members],
      [member.weight for member in config.tasks],
      config.sampling,
      config.temperature,
    )

  @property
  def num_train_examples(self) -> int:
    """Rows of one pass over every member's train split."""
    return sum(data.num_train_examples for data in self.members)

  @property
  def num_eval_examples(self) -> int:
    return sum(data.num_eval_examples for data in self.members)

  def schedule(self, seed: int) -> sampling.Schedule:
    """The member of every train step of a run seeded ``seed``."""
    return sampling.Schedule(self.shares, self.config.sampling, seed)

  def union_batch(self, index: int, host_batch, row_offset: int = 0):
    """Member ``index``'s host batch in the shared schema (see the module docstring)."""
    rows = len(host_batch["row_id"])
    batch = {}
    for key in ENCODER_KEYS:
      part = host_batch[key]
      batch[key] = np.pad(part, ((0, 0), (0, self.max_seq_length - part.shape[1])))
    batch["example_weight"] = host_batch["example_weight"]
    row_id = host_batch["row_id"]
    batch["row_id"] = np.where(row_id >= 0, row_id + row_offset, -1).astype(np.int32)
    batch[TASK_ID] = np.full((rows,), index, np.int32)
    for j, (name, schema) in enumerate(zip(self.names, self._schemas)):
      for key, (shape, dtype) in schema.items():
        batch[member_key(name, key)] = (
          host_batch[key] if j == index else np.zeros((rows,) + shape, dtype)
        )
    return batch

  def batches(self, split, seed, global_batch_size, process_index, process_count, start_position=0):
    """Host batches of ``split`` ("train": endless, sampled; "eval": every member in order)."""
    if split == "train":
      return _TrainBatches(
        self, seed, global_batch_size, process_index, process_count, start_position
      )
    if split != "eval":
      raise ValueError(f"split={split!r}: multi-task runs have train and eval splits")
    return _EvalBatches(self, seed, global_batch_size, process_index, process_count)

  def evaluate(self, predictions):
    """Every member's official metrics and prediction files, keyed by its name.

    Args:
      predictions: {``<name>/<key>``: array [F_eval, ...]} over every member's eval rows,
        ordered by the offset row ids of the eval batches.

    Returns:
      ({``<name>/<metric>``: value}, {``<name>/<file>``: text}).
    """
    metrics, files, offset = {}, {}, 0
    for name, data in zip(self.names, self.members):
      count = data.num_eval_examples
      rows = {k: v[offset : offset + count] for k, v in member_items(name, predictions).items()}
      member_metrics, member_files = data.evaluate(rows)
      metrics.update({member_key(name, k): v for k, v in member_metrics.items()})
      files.update({member_key(name, k): v for k, v in member_files.items()})
      offset += count
    return metrics, files

  def test_prediction_files(self, predictions):
    """Never called: a multi-task run has no test split (``test_arrays`` is None)."""
    del predictions
    raise UserInputError("multi-task runs write no test predictions; unset data.test_path")


class _TrainBatches:
  """Endless train batches, each from the member the schedule draws for its step."""

  def __init__(self, data, seed, global_batch_size, process_index, process_count, position):
    self._data = data
    self._global_batch_size = global_batch_size
    self._schedule = data.schedule(seed)
    counts = self._schedule.counts_before(position // global_batch_size)
    self._members = [
      member.batches(
        "train",
        seed,
        global_batch_size,
        process_index,
        process_count,
        start_position=int(count) * global_batch_size,
      )
      for member, count in zip(data.members, counts)
    ]
    self.position = position

  def __iter__(self):
    return self

  def __next__(self):
    index = self._schedule.task_at(self.position // self._global_batch_size)
    self.position += self._global_batch_size
    return self._data.union_batch(index, next(self._members[index]))


class _EvalBatches:
  """Every member's eval batches in order, with row ids offset past the earlier members'."""

  def __init__(self, data, seed, global_batch_size, process_index, process_count):
    self._data = data
    self._parts = [
      (index, member.batches("eval", seed, global_batch_size, process_index, process_count))
      for index, member in enumerate(data.members)
    ]
    self._offsets = np.cumsum([0] + [member.num_eval_examples for member in data.members])

  def __iter__(self):
    return self

  def __next__(self):
    while self._parts:
      index, batches = self._parts[0]
      try:
        host_batch = next(batches)
      except StopIteration:
        self._parts.pop(0)
        continue
      return self._data.union_batch(index, host_batch, int(self._offsets[index]))
    raise StopIteration


def make_data(config: MultitaskDataConfig, tokenizer) -> MultitaskData:
  """Every member's data object, each built as its single-task run builds it (registry entry).

  Raises:
    UserInputError: a member's files are missing or malformed (from its task's reader).
  """
  return MultitaskData(
    config, [members.MAKE_DATA[member.task](member.data, tokenizer) for member in config.tasks]
  )
