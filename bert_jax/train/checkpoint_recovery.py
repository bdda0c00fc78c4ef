"""Resuming past damaged checkpoints: the newest one that restores wins; bad ones are kept aside.

A truncated array file, a lost metadata file or an emptied step directory must not end every
restart in a traceback (an automatic restarter would loop on it) while older checkpoints are
intact. Damaged steps newer than the one that restores are moved to
``<workdir>/checkpoints.damaged/<step>`` (never deleted), so the run's next saves cannot collide
with them and someone can still inspect them. When no checkpoint restores, nothing is moved:
the cause is then more likely the program or the config than the files, and the run stops with
one line rather than starting from scratch over existing checkpoints.
"""

import jax
from absl import logging
from etils import epath
from jax.experimental import multihost_utils

from bert_jax import workdir as workdir_lib
from bert_jax.errors import UserInputError
from bert_jax.train.checkpointing import Checkpointer

# How much of a restore error's first line a warning or the final error quotes.
_REASON_CHARS = 120


def _reason(error: Exception) -> str:
  lines = str(error).strip().splitlines()
  text = lines[0] if lines else ""
  if len(text) > _REASON_CHARS:
    text = text[: _REASON_CHARS - 3] + "..."
  return f"{type(error).__name__}: {text}" if text else type(error).__name__


def candidate_steps(checkpointer: Checkpointer) -> list[int]:
  """Every ``checkpoints/<step>`` directory, finished or not, newest first."""
  workdir = workdir_lib.Workdir(epath.Path(checkpointer.directory).parent)
  return sorted(set(checkpointer.all_steps()) | set(workdir.checkpoint_steps()), reverse=True)


def _move_aside(checkpointer: Checkpointer, step: int) -> epath.Path:
  """Moves ``checkpoints/<step>`` under ``checkpoints.damaged/`` (a fresh name if taken)."""
  workdir = workdir_lib.Workdir(epath.Path(checkpointer.directory).parent)
  target = workdir.damaged_checkpoints / str(step)
  suffix = 1
  while target.exists():
    target = workdir.damaged_checkpoints / f"{step}.{suffix}"
    suffix += 1
  workdir.damaged_checkpoints.mkdir(parents=True, exist_ok=True)
  workdir.checkpoint(step).rename(target)
  return target


def restore_newest(checkpointer: Checkpointer, abstract_state, abstract_rng):
  """(state, rng, data position) of the newest checkpoint that restores; None if there is none.

  Raises:
    UserInputError: checkpoints exist but none restores, or the newest readable one belongs to
      another model (`Checkpointer.check_compatible`).
  """
  failures = []  # (step, reason), newest first.
  for step in candidate_steps(checkpointer):
    try:
      restored = checkpointer.restore(step, abstract_state, abstract_rng)
    except UserInputError:
      raise  # Readable, but another model's or converted weights: the user's choice to fix.
    except Exception as error:  # pylint: disable=broad-except
      # Damage shows up as whatever the storage layer trips on: TensorStore's ValueError for a
      # truncated file, KeyError / TypeError / FileNotFoundError for missing metadata.
      failures.append((step, _reason(error)))
      logging.warning("Checkpoint %s/%d does not restore: %s", checkpointer.directory, step, error)
      continue
    if failures:
      _set_aside(checkpointer, failures, step)
    logging.info("Resuming from %s/%d", checkpointer.directory, step)
    return restored
  if failures:
    newest, reason = failures[0]
    raise UserInputError(
      f"none of the {len(failures)} checkpoints in {checkpointer.directory} restores (newest, "
      f"{newest}: {reason}); fix or move them, or use a new --workdir"
    )
  return None


def _set_aside(checkpointer: Checkpointer, failures, resume_step: int):
  """Moves the damaged steps out of ``checkpoints/`` (process 0) and tells the manager."""
  if jax.process_index() == 0:
    for step, reason in failures:
      target = _move_aside(checkpointer, step)
      logging.warning(
        "Checkpoint step %d is damaged (%s); moved it to %s, resuming from step %d",
        step,
        reason,
        target,
        resume_step,
      )
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices("damaged checkpoints moved aside")
  checkpointer.reload()
