"""Preemption of a real `bert_jax.main` process: SIGKILL between checkpoints, then the same
command resumes to the uninterrupted run's parameters; SIGTERM saves a checkpoint and exits 0.

(Split from test_train_loop.py so that the two heaviest subprocess files run on both pytest-xdist
workers, not one after the other.)"""

import pathlib
import signal
import time

import numpy as np

from tests import run_helpers


def _wait_for(predicate, process, log_path, timeout=240):
  """Polls ``predicate``; fails with the child's log if it exits or time runs out first."""
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if predicate():
      return
    if process.poll() is not None:
      break
    time.sleep(0.05)
  raise AssertionError(
    f"condition not reached (exit code {process.poll()}):\n"
    f"{pathlib.Path(log_path).read_text()[-3000:]}"
  )


def _train_rows(workdir):
  path = pathlib.Path(workdir) / "metrics.jsonl"
  return run_helpers.read_metrics(workdir) if path.exists() else []


def test_sigkill_between_checkpoints_then_resume_matches_uninterrupted(tmp_path):
  flags = run_helpers.quick_flags(
    tmp_path, num_train_steps=40, checkpoint_every_steps=16, log_every_steps=4
  )
  # One compilation cache for the three runs: the killed and the resumed run load the straight
  # run's programs (the same executables, so the bitwise comparison still holds).
  flags.append(f"--config.compilation_cache_dir={tmp_path / 'xla_cache'}")
  straight = run_helpers.run_main(tmp_path / "straight", flags)
  assert straight.returncode == 0, straight.stderr[-3000:]

  killed_dir = tmp_path / "killed"
  log_path = tmp_path / "killed.log"
  process = run_helpers.start_main(killed_dir, flags, stderr_path=log_path)
  try:  # Kill once checkpoint 16 is final and training has gone past it, before 32.
    _wait_for(
      lambda: (
        (killed_dir / "checkpoints" / "16").exists()
        and any(r["step"] > 16 for r in _train_rows(killed_dir))
      ),
      process,
      log_path,
    )
    process.send_signal(signal.SIGKILL)
    process.wait()
  finally:
    process.kill()
  assert run_helpers.checkpoint_steps(killed_dir) == [16]
  resumed = run_helpers.run_main(killed_dir, flags)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  expected = run_helpers.restore_params(tmp_path / "straight", 40)
  actual = run_helpers.restore_params(killed_dir, 40)
  assert expected.keys() == actual.keys()
  for name in expected:  # Bitwise: same XLA program, same data, same rng on the same CPU.
    np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def test_sigterm_saves_a_checkpoint_and_exits_zero(tmp_path):
  flags = run_helpers.quick_flags(tmp_path, num_train_steps=500, checkpoint_every_steps=1000)
  log_path = tmp_path / "run.log"
  process = run_helpers.start_main(tmp_path, flags, stderr_path=log_path)
  try:
    _wait_for(lambda: any(r["step"] >= 3 for r in _train_rows(tmp_path)), process, log_path)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=120)
  finally:
    process.kill()
  assert process.returncode == 0, log_path.read_text()[-3000:]
  saved = run_helpers.checkpoint_steps(tmp_path)
  assert len(saved) == 1 and 3 <= saved[0] < 500
