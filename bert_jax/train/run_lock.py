"""The workdir lock: ``<workdir>/run.lock`` says which run owns a workdir.

Process 0 of a run creates the lock before anything is written and renews its lease from a
background thread while the run lives; a second run on the same workdir is refused with one
line naming the holder. A lock whose holder is gone (its pid is dead on this host, or its lease
ran out without a renewal) is taken over with a warning, so an automatic restarter never needs
manual cleanup.

Every change to the lock is an atomic compare-and-swap through a TensorStore key-value store:
on a local disk the ``file`` driver (an exclusive create, and the filesystem's locking for
replacing a stale lock), on ``gs://`` the ``gcs`` driver (a write with an
``x-goog-if-generation-match`` precondition). Two runs that race for a lock therefore never
both win, and a run never overwrites a lock that another run has just taken over.
"""

import dataclasses
import json
import os
import socket
import sys
import threading
import time

import jax
import numpy as np
import tensorstore as ts
from absl import logging
from jax.experimental import multihost_utils

from bert_jax import workdir as workdir_lib
from bert_jax.errors import UserInputError

# Longest command line quoted in the one-line refusal (the whole line stays under ~300 chars).
_COMMAND_CHARS = 60


class WorkdirBusyError(UserInputError):
  """Another live run holds the workdir's lock."""


@dataclasses.dataclass(frozen=True)
class Holder:
  """Who holds a lock, as written in ``run.lock`` (JSON)."""

  host: str
  pid: int
  started: float  # Unix time the run took the lock.
  renewed: float  # Unix time of the last lease renewal.
  lease_secs: float
  command: str

  @classmethod
  def of_this_process(cls, lease_secs: float) -> "Holder":
    now = time.time()
    return cls(socket.gethostname(), os.getpid(), now, now, lease_secs, " ".join(sys.argv))

  @classmethod
  def parse(cls, text: bytes) -> "Holder | None":
    """The holder written in ``text``; None if it is not a lock this module wrote."""
    try:
      values = json.loads(text)
      return cls(**{f.name: values[f.name] for f in dataclasses.fields(cls)})
    except (ValueError, KeyError, TypeError):
      return None

  def dump(self) -> bytes:
    return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

  def why_stale(self, now: float) -> str:
    """Why this holder no longer owns the lock; "" while it does."""
    if now > self.renewed + self.lease_secs:
      return f"its lease ran out {now - self.renewed - self.lease_secs:.0f}s ago"
    if self.host == socket.gethostname() and not _pid_alive(self.pid):
      return f"pid {self.pid} is no longer running on this host"
    return ""

  def describe(self) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(self.started))
    command = self.command
    if len(command) > _COMMAND_CHARS:
      command = command[: _COMMAND_CHARS - 3] + "..."
    return f"pid {self.pid} on host {self.host} since {started} ({command!r})"


def _pid_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # Alive, owned by another user.
    return True
  return True


def _open_store(directory) -> ts.KvStore:
  # Keys are appended to the path without a separator: the path must end in "/".
  path = str(directory).rstrip("/") + "/"
  spec = path if "://" in path else {"driver": "file", "path": path}
  return ts.KvStore.open(spec).result()


class WorkdirLock:
  """The lock this process holds on a workdir; renews its lease until `release`.

  Attributes:
    path: the lock file.
    lost: set when a renewal found the lock taken by another run.
  """

  def __init__(self, store, path, holder: Holder, generation: bytes):
    self.path = path
    self.lost = False
    self._store, self._holder, self._generation = store, holder, generation
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._renew_until_stopped, daemon=True)
    self._thread.start()

  @classmethod
  def acquire(cls, workdir, lease_secs: float) -> "WorkdirLock":
    """Takes the lock of ``workdir`` (creating the directory), or raises `WorkdirBusyError`."""
    workdir = workdir_lib.Workdir.at(workdir)
    try:
      return cls._acquire(workdir, lease_secs)
    except ValueError as error:  # TensorStore reports storage failures as ValueError.
      if isinstance(error, UserInputError):
        raise
      reason = str(error).splitlines()[0][:120]
      raise UserInputError(
        f"cannot write the lock {workdir.lock} ({reason}); check that --workdir is a "
        "writable directory"
      ) from None

  @classmethod
  def _acquire(cls, workdir: workdir_lib.Workdir, lease_secs: float) -> "WorkdirLock":
    store = _open_store(workdir.path)
    holder = Holder.of_this_process(lease_secs)
    for _ in range(8):  # Retry only when the lock changed between our read and our write.
      current = store.read(workdir_lib.LOCK_FILE).result()
      if current.state == "value":
        previous = Holder.parse(current.value)
        reason = (
          "it is not a lock file this program wrote"
          if previous is None
          else previous.why_stale(time.time())
        )
        if not reason:
          raise WorkdirBusyError(
            f"{workdir.path} is in use by the run of {previous.describe()}; stop that run or "
            f"use another --workdir (a lock whose run died is taken over by itself)"
          )
      written = store.write(
        workdir_lib.LOCK_FILE, holder.dump(), if_equal=current.stamp.generation
      ).result()
      if written.generation:
        if current.state == "value":
          logging.warning("Took over the lock %s: %s", workdir.lock, reason)
        return cls(store, workdir.lock, holder, written.generation)
    raise WorkdirBusyError(f"{workdir.lock} keeps changing; another run is starting there")

  def _renew_until_stopped(self):
    while not self._stop.wait(self._holder.lease_secs / 4):
      holder = dataclasses.replace(self._holder, renewed=time.time())
      try:
        written = self._store.write(
          workdir_lib.LOCK_FILE, holder.dump(), if_equal=self._generation
        ).result()
      except ValueError as error:  # A storage hiccup: keep the lease, try again next time.
        logging.warning("Could not renew the lock %s: %s", self.path, error)
        continue
      if not written.generation:
        self.lost = True
        logging.error("Lost the lock %s to another run; this run should stop", self.path)
        return
      self._holder, self._generation = holder, written.generation

  def check(self):
    """Raises if another run took the lock over (its lease expired while this run hung)."""
    if self.lost:
      raise WorkdirBusyError(
        f"another run took over {self.path} while this run held it (the lease of "
        f"{self._holder.lease_secs:.0f}s ran out); stop one of the runs"
      )

  def release(self):
    """Stops renewing and deletes the lock if it is still this run's."""
    self._stop.set()
    self._thread.join()
    if not self.lost:
      self._store.write(workdir_lib.LOCK_FILE, None, if_equal=self._generation).result()


class NoLock:
  """What processes other than 0 hold: nothing to renew or release."""

  lost = False

  def check(self):
    pass

  def release(self):
    pass


def acquire_for_run(workdir, lease_secs: float):
  """Process 0 takes the workdir lock; every process learns whether it did.

  Returns:
    A `WorkdirLock` on process 0, a `NoLock` elsewhere.

  Raises:
    WorkdirBusyError: on every process, when process 0 could not take the lock.
  """
  lock, refusal = NoLock(), None
  if jax.process_index() == 0:
    try:
      lock = WorkdirLock.acquire(workdir, lease_secs)
    except WorkdirBusyError as error:
      refusal = error
  if jax.process_count() > 1:
    taken = multihost_utils.broadcast_one_to_all(np.int32(refusal is None))
    if not int(taken) and refusal is None:
      refusal = WorkdirBusyError(
        f"process 0 could not lock {workdir}; its log names the run holding it"
      )
  if refusal is not None:
    raise refusal
  return lock
