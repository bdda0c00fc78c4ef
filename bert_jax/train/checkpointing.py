"""Orbax checkpoints of the train state (with a causal LM's memory), the base rng and the data
position.

Precedence when a run starts (the one place it is decided, see `loop.restore_or_initialize`):
resume from ``<workdir>/checkpoints`` > ``init_from`` > from scratch.
"""

import contextlib
import errno
import functools
import os

import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging

# The store of per-array metadata that Orbax's default `jax.Array` handler writes with; Orbax
# exports no public name for it (orbax-checkpoint is pinned in setup.py).
from orbax.checkpoint._src.metadata import array_metadata_store

from bert_jax import workdir as workdir_lib
from bert_jax.errors import UserInputError
from bert_jax.train import background_errors

# Orbax saves a replicated array replica-parallel: each of its R replicas writes 1/R of it, a
# device slice per replica, array and offset, each slice an op compiled on first use. Below
# this many bytes per part the write is a few small requests either way and the slicing is
# all that changes: BERT-tiny's first checkpoint on 4 CPU devices sliced 540 parts of mostly
# bias- and LayerNorm-sized arrays (1.8-2.0 CPU-s); at this floor, 60 parts (0.5 s). A large
# array (an embedding table, BERT-base's 768x768 kernels over 32 replicas) is still split.
MIN_BYTES_PER_REPLICA_PART = 64 << 10


@functools.cache
def _register_array_handler():
  """Makes Orbax's handler of `jax.Array` (process-wide, once) split only arrays whose parts
  reach `MIN_BYTES_PER_REPLICA_PART`; smaller ones are written whole by their first replica."""
  ocp.type_handlers.register_type_handler(
    jax.Array,
    ocp.type_handlers.ArrayHandler(
      array_metadata_store=array_metadata_store.Store(),
      min_slice_bytes_for_replica_parallel=MIN_BYTES_PER_REPLICA_PART,
    ),
    override=True,
  )


class Checkpointer:
  """Saves and restores `TrainState` + rng + data position under ``<workdir>/checkpoints``.

  A causal LM's state (`state.RecurrentTrainState`) adds its segment memory, so a resumed run
  continues every stream with the memory it had; other states hold exactly what they did.

  Saves are asynchronous: the train loop continues while arrays are written; a save never
  replaces an existing step, and only finished saves count as checkpoints. A save that fails
  in the background (a full disk) is one warning naming the step and the cause; its
  tracebacks go to ``<workdir>/errors.log`` (`background_errors`), and `check` raises its
  error at the next step.
  """

  def __init__(self, workdir: str, max_to_keep: int = 3, record: dict | None = None):
    """Checkpoints under ``<workdir>/checkpoints``.

    Args:
      workdir: the run's workdir.
      max_to_keep: older checkpoints are deleted.
      record: JSON-able facts saved with every checkpoint (beside the data position) that a
        resume must match, e.g. a distillation teacher's identity; None = nothing recorded.
    """
    _register_array_handler()
    self.directory = workdir_lib.Workdir.at(workdir).checkpoints
    self._record = record
    log = workdir_lib.Workdir.at(workdir).errors_log
    if jax.process_count() > 1:
      log = log.with_name(f"errors.process_{jax.process_index()}.log")
    self._background = background_errors.BackgroundErrors(str(log))
    self._saving = None  # The step of the latest save.
    self._warned = False
    self._manager = ocp.CheckpointManager(
      self.directory,
      options=ocp.CheckpointManagerOptions(
        max_to_keep=max_to_keep, create=True, enable_async_checkpointing=True
      ),
      item_handlers={
        "state": ocp.StandardCheckpointHandler(),
        "rng": ocp.StandardCheckpointHandler(),
        "data": ocp.JsonCheckpointHandler(),
      },
    )

  def latest_step(self):
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    """Finished checkpoints, ascending."""
    return sorted(self._manager.all_steps())

  def reload(self):
    """Re-reads the checkpoint directory (after steps were moved out of it)."""
    self._manager.reload()

  def save(self, step: int, state, rng, data_position: int):
    """Starts an asynchronous save of everything needed to resume at ``step``.

    Raises the error of the previous save if that failed.
    """
    # Orbax's threads start here; from now on their errors go to the log.
    self._background.install()
    with self._failure_warning():
      self._save(step, state, rng, data_position)
    self._saving = step

  def _save(self, step: int, state, rng, data_position: int):
    self._manager.save(
      step,
      args=ocp.args.Composite(
        state=ocp.args.StandardSave(state),
        rng=ocp.args.StandardSave({"key_data": jax.random.key_data(rng)}),
        data=ocp.args.JsonSave(
          {"position": int(data_position), **({"record": self._record} if self._record else {})}
        ),
      ),
      force=True,
    )

  def check_compatible(self, step: int, abstract_state):
    """Raises a one-line error if the checkpoint's params differ in shape from the model's."""
    where = f"checkpoint {self.directory}/{step}"
    stored_state = self._manager.item_metadata(step)["state"]
    if "opt_state" not in stored_state:
      raise UserInputError(
        f"{where} holds parameters only (converted weights), not a run to resume; pass "
        f"--config.init_from={self.directory.parent} and a new --workdir"
      )
    if hasattr(abstract_state, "memory") != ("memory" in stored_state):
      has, lacks = ("lacks", "needs") if hasattr(abstract_state, "memory") else ("holds", "has not")
      raise UserInputError(
        f"{where} {has} the segment memory this run {lacks} (data.objective='clm' with "
        "model.recurrence.mem_len > 0 carries one): use a new --workdir or the config that wrote it"
      )
    stored = _shapes_by_path(stored_state["params"])
    wanted = _shapes_by_path(abstract_state.params)
    for path in sorted(set(stored) | set(wanted)):
      if path not in wanted:
        problem = f"has params/{path}, which this model does not"
      elif path not in stored:
        problem = f"lacks params/{path}, which this model needs"
      elif stored[path] != wanted[path]:
        problem = f"holds params/{path} of shape {stored[path]}, this config needs {wanted[path]}"
      else:
        continue
      raise UserInputError(
        f"{where} {problem}: it was written by another model; use a new "
        "--workdir or the config that wrote it"
      )

  def restore(self, step: int, abstract_state, abstract_rng):
    """Restores (state, rng, data position) into the shardings of ``abstract_state``."""
    self.check_compatible(step, abstract_state)
    key_data = jax.ShapeDtypeStruct(
      jax.random.key_data(abstract_rng).shape, np.uint32, sharding=abstract_rng.sharding
    )
    restored = self._manager.restore(
      step,
      args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract_state),
        rng=ocp.args.StandardRestore({"key_data": key_data}),
        data=ocp.args.JsonRestore(),
      ),
    )
    self._check_record(step, restored["data"].get("record"))
    rng = jax.random.wrap_key_data(restored["rng"]["key_data"])
    return restored["state"], rng, int(restored["data"]["position"])

  def _check_record(self, step: int, stored):
    """Raises a one-line error if the checkpoint was written with another record."""
    if stored == self._record:
      return
    for key in sorted(set(stored or {}) | set(self._record or {})):
      theirs, ours = (stored or {}).get(key), (self._record or {}).get(key)
      if theirs != ours:
        raise UserInputError(
          f"checkpoint {self.directory}/{step} was written with {key}={theirs} but this run "
          f"has {key}={ours}; resume with what wrote it, or use a new --workdir"
        )

  def reached_preemption(self, step: int) -> bool:
    """True on every host once any host got a preemption notice (multi-process runs)."""
    return self._manager.reached_preemption(step)

  def check(self):
    """Raises the error of a save that failed in the background; cheap when none did.

    Waits for the save in flight only once errors were logged, and only the first time.
    """
    if self._background.failed and not self._warned:
      self.wait()
      self._warned = True  # Errors were logged, yet the save finished.
      logging.warning(
        "errors while saving checkpoint %s; tracebacks in %s",
        self._saving,
        self._background.log_path,
      )

  def wait(self):
    """Waits for the save in flight; raises its error if it failed."""
    with self._failure_warning():
      self._manager.wait_until_finished()

  def close(self):
    """Waits for the save in flight (raising its error), then releases Orbax's threads."""
    try:
      self.wait()
      self._manager.close()
    finally:
      # After a failure TensorStore writes that were in flight may still call back (into a
      # closed event loop): their tracebacks keep going to the log until the process ends.
      if not self._background.failed:
        self._background.uninstall()

  @contextlib.contextmanager
  def _failure_warning(self):
    """One warning for the first failed save: its step, the cause and where the tracebacks are.

    A full disk is raised as an `OSError` naming the step's directory: TensorStore's messages
    do not always name a file, and the step is what the user knows.
    """
    try:
      yield
    except Exception as error:
      if not self._warned:
        self._warned = True
        logging.warning(
          "saving checkpoint %s failed (%s); tracebacks in %s",
          self._saving,
          background_errors.cause(error),
          self._background.log_path,
        )
      if background_errors.is_disk_full(error) and self._saving is not None:
        step_directory = str(self.directory / str(self._saving))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), step_directory) from error
      raise


def _shapes_by_path(tree):
  """{"a/b/kernel": shape} for a params tree of arrays, abstract arrays or Orbax metadata."""

  def name(key):
    for attribute in ("key", "name", "idx"):
      if hasattr(key, attribute):
        return str(getattr(key, attribute))
    return str(key)

  flat = jax.tree_util.tree_flatten_with_path(tree)[0]
  return {"/".join(name(k) for k in path): tuple(leaf.shape) for path, leaf in flat}
