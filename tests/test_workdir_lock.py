"""The workdir lock: one run per workdir; a dead holder's lock is taken over without cleanup."""

import json
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from bert_jax.train import run_lock
from tests import run_helpers

# A process that takes the lock, says so, and holds it until it is killed.
_HOLDER = (
  "import sys, time\n"
  "from bert_jax.train import run_lock\n"
  "run_lock.WorkdirLock.acquire(sys.argv[1], lease_secs=300)\n"
  "print('locked', flush=True)\n"
  "time.sleep(600)\n"
)


def _start_holder(workdir):
  process = subprocess.Popen(
    [sys.executable, "-c", _HOLDER, str(workdir)],
    env=run_helpers.env(),
    cwd=run_helpers.REPO,
    stdout=subprocess.PIPE,
    stderr=subprocess.DEVNULL,
    text=True,
  )
  assert process.stdout.readline().strip() == "locked"
  return process


def _kill(process):
  process.send_signal(signal.SIGKILL)
  process.wait()


def _write_lock(workdir, **fields):
  holder = dict(
    host="another-host", pid=1, started=time.time(), renewed=time.time(), lease_secs=60.0
  )
  holder.update(command="python -m bert_jax.main", **fields)
  (workdir / "run.lock").write_text(json.dumps(holder))


def test_live_holder_refuses_dead_or_expired_holder_is_taken_over(tmp_path, caplog):
  holder = _start_holder(tmp_path)
  try:
    with pytest.raises(run_lock.WorkdirBusyError, match=rf"in use by the run of pid {holder.pid} "):
      run_lock.WorkdirLock.acquire(tmp_path, lease_secs=60)
  finally:
    _kill(holder)
  lock = run_lock.WorkdirLock.acquire(tmp_path, lease_secs=60)
  assert f"pid {holder.pid} is no longer running on this host" in caplog.text
  assert json.loads((tmp_path / "run.lock").read_text())["pid"] != holder.pid
  with pytest.raises(run_lock.WorkdirBusyError):  # Not even this process takes it twice.
    run_lock.WorkdirLock.acquire(tmp_path, lease_secs=60)
  lock.release()
  assert not (tmp_path / "run.lock").exists()

  # Another host's lock: refused while its lease runs, taken over once it ran out.
  _write_lock(tmp_path)
  with pytest.raises(run_lock.WorkdirBusyError, match="pid 1 on host another-host"):
    run_lock.WorkdirLock.acquire(tmp_path, lease_secs=60)
  _write_lock(tmp_path, renewed=time.time() - 120)
  run_lock.WorkdirLock.acquire(tmp_path, lease_secs=60).release()
  assert re.search(r"lease ran out \d+s ago", caplog.text)


def _eventually(condition, timeout_secs=60.0):
  """Whether ``condition()`` holds within ``timeout_secs``: a loaded machine may run the
  renewal thread late, so the tests wait for what it does rather than for a fixed time."""
  deadline = time.monotonic() + timeout_secs
  while not condition():
    if time.monotonic() > deadline:
      return False
    time.sleep(0.02)
  return True


def test_the_lease_is_renewed_and_a_lost_lock_stops_the_run(tmp_path):
  lock = run_lock.WorkdirLock.acquire(tmp_path, lease_secs=0.4)  # Renewed every 0.1 s.
  read_renewed = lambda: json.loads((tmp_path / "run.lock").read_text())["renewed"]  # pylint: disable=unnecessary-lambda-assignment
  first = read_renewed()
  assert _eventually(lambda: read_renewed() > first)
  lock.check()
  _write_lock(tmp_path, host=socket.gethostname(), pid=1)  # Another run took it over.
  assert _eventually(lambda: lock.lost)  # The next renewal finds it.
  with pytest.raises(run_lock.WorkdirBusyError, match="another run took over"):
    lock.check()
  lock.release()
  assert json.loads((tmp_path / "run.lock").read_text())["pid"] == 1  # Not ours to delete.


def test_two_runs_at_once_one_trains_the_other_exits_2_naming_it(tmp_path):
  workdir = tmp_path / "run"
  _kill(_start_holder(workdir))  # A SIGKILLed run's lock is left behind.
  flags = run_helpers.quick_flags(
    tmp_path, num_train_steps=4, checkpoint_every_steps=4, eval_every_steps=4
  )
  runs = [run_helpers.start_main(workdir, flags) for _ in range(2)]
  results = [(run, run.communicate(timeout=300)[1]) for run in runs]
  codes = sorted(run.returncode for run, _ in results)
  assert codes == [0, 2], [err[-2000:] for _, err in results]
  (winner, winner_err), (_, loser_err) = sorted(results, key=lambda r: r[0].returncode)
  assert "Took over the lock" in winner_err and "is no longer running" in winner_err
  last_line = loser_err.strip().splitlines()[-1]
  assert last_line.startswith("error: ") and len(last_line) < 300, last_line
  assert f"is in use by the run of pid {winner.pid} on host {socket.gethostname()}" in last_line
  assert [r["step"] for r in run_helpers.read_metrics(workdir)] == [1, 2, 3, 4]
  assert run_helpers.checkpoint_steps(workdir) == [4]
  assert not (workdir / "run.lock").exists()
