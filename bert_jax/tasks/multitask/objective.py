"""The multi-task objective: each member's own loss and sums, on the rows of its batches.

Member i sees the batch as its single-task objective would (`_member_batch`): the encoder
inputs cut to its length, its own features, and ``example_weight`` zeroed unless the batch's
``task_id`` is i. A batch holds one member's rows, so the step's loss is that member's mean
loss exactly (the others contribute 0, with zero gradient). Sums are keyed ``<name>/<sum>``,
with ``<name>/rows`` counting the member's rows, so metrics name their member
(``mrpc/loss``, ``mrpc/accuracy``) and a log interval reports only members it trained on.
"""

import dataclasses

import jax.numpy as jnp
import numpy as np

from bert_jax.tasks.interface import TaskDefaults
from bert_jax.tasks.multitask import members
from bert_jax.tasks.multitask.config import MultitaskDataConfig
from bert_jax.tasks.multitask.data import (
  ENCODER_KEYS,
  ROW_KEYS,
  TASK_ID,
  member_items,
  member_key,
)
from bert_jax.tasks.multitask.model import MultitaskModel
from bert_jax.tasks.weighted_rows import encoder_batch

ROWS = "rows"


@dataclasses.dataclass(frozen=True)
class MultitaskTask(TaskDefaults):
  """Member objectives over one shared trunk.

  Attributes:
    names: member names, in order.
    tasks: each member's single-task objective (classification, tagging, span QA).
    max_seq_length: the shared batch's sequence length (the longest member's).
  """

  names: tuple
  tasks: tuple
  max_seq_length: int

  predicts = True  # Every member's, keyed by member (`predictions`).

  def example_batch(self, batch_size: int):
    """Zero-filled numpy batch of the shared schema (`bert_jax.tasks.multitask.data`)."""
    batch = encoder_batch((batch_size, self.max_seq_length), batch_size)
    batch[TASK_ID] = np.zeros((batch_size,), np.int32)
    for name, task in zip(self.names, self.tasks):
      for key, value in task.example_batch(batch_size).items():
        if key not in ENCODER_KEYS + ROW_KEYS:
          batch[member_key(name, key)] = value
    return batch

  def model(self, deterministic: bool) -> MultitaskModel:
    return MultitaskModel(
      self.names,
      tuple(task.model(deterministic) for task in self.tasks),
      tuple(task.max_seq_length for task in self.tasks),
    )

  def model_inputs(self, batch):
    return batch["input_ids"], batch["token_type_ids"], batch["input_mask"], batch[TASK_ID]

  def _member_batch(self, index, batch):
    name, length = self.names[index], self.tasks[index].max_seq_length
    view = {key: batch[key][:, :length] for key in ENCODER_KEYS}
    view["row_id"] = batch["row_id"]
    view["example_weight"] = batch["example_weight"] * (batch[TASK_ID] == index)
    view.update(member_items(name, batch))
    return view

  def denominators(self, batch):
    """Every member's denominators over its rows of the batch, keyed ``<name>/<key>``."""
    result = {}
    for index, (name, task) in enumerate(zip(self.names, self.tasks)):
      for key, value in task.denominators(self._member_batch(index, batch)).items():
        result[member_key(name, key)] = value
    return result

  def loss_and_sums(self, outputs, batch, denominators):
    """The sum of the members' mean losses (the batch's member's alone), and every sum."""
    loss, sums = jnp.zeros((), jnp.float32), {}
    for index, (name, task) in enumerate(zip(self.names, self.tasks)):
      view = self._member_batch(index, batch)
      member_loss, member_sums = task.loss_and_sums(
        member_items(name, outputs), view, member_items(name, denominators)
      )
      loss = loss + member_loss
      sums.update({member_key(name, k): v for k, v in member_sums.items()})
      sums[member_key(name, ROWS)] = jnp.sum(view["example_weight"])
    return loss, sums

  def metrics_from_sums(self, sums):
    """Each member's metrics (``<name>/<metric>``) where it had rows; ``loss``: their mean."""
    row, losses = {}, []
    for name, task in zip(self.names, self.tasks):
      member_sums = member_items(name, sums)
      if float(member_sums.pop(ROWS)) == 0:
        continue
      metrics = task.metrics_from_sums(member_sums)
      row.update({member_key(name, k): v for k, v in metrics.items()})
      losses.append(metrics["loss"])
    row["loss"] = float(np.mean(losses)) if losses else 0.0
    return row

  def predictions(self, outputs, batch):
    """Every member's predictions of every row, keyed ``<name>/<key>``."""
    result = {}
    for index, (name, task) in enumerate(zip(self.names, self.tasks)):
      predictions = task.predictions(member_items(name, outputs), self._member_batch(index, batch))
      result.update({member_key(name, k): v for k, v in predictions.items()})
    return result


def make_task(model_config, data_config: MultitaskDataConfig, data) -> MultitaskTask:
  """Registry entry point: each member's objective, sized by its own data."""
  return MultitaskTask(
    tuple(member.name for member in data_config.tasks),
    tuple(
      members.MAKE_TASK[member.task](model_config, member.data, member_data)
      for member, member_data in zip(data_config.tasks, data.members)
    ),
    data_config.max_seq_length,
  )
