"""A full disk during an asynchronous save: one `error:` line naming the cause, earlier
checkpoints intact, and the same command resumes once there is space again."""

import errno
import logging
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import threading

import pytest
from absl import logging as absl_logging

from bert_jax.cli import error_lines
from bert_jax.train import background_errors, checkpointing, metrics_writer
from tests import run_helpers

# Holds the first checkpoint of the run below (~17 MB) but not the second.
_SMALL_DISK = "20m"


@pytest.fixture
def small_disk(tmp_path):
  """A 20 MB tmpfs (needs root, as in the project's CI container); unmounted afterwards."""
  mount_point = tmp_path / "disk"
  mount_point.mkdir()
  mounted = subprocess.run(
    ["mount", "-t", "tmpfs", "-o", f"size={_SMALL_DISK}", "tmpfs", str(mount_point)],
    capture_output=True,
    text=True,
    check=False,
  )
  if mounted.returncode:
    pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()})")
  yield mount_point
  subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_full_disk_during_a_save_is_one_line_and_the_run_resumes(small_disk):
  workdir = small_disk / "run"
  flags = run_helpers.quick_flags(
    small_disk.parent, num_train_steps=8, checkpoint_every_steps=4, log_every_steps=4
  )
  # Only checkpoints fill this disk; the compiled programs sit beside it, where the resumed run
  # loads them instead of compiling again.
  flags.append(f"--config.compilation_cache_dir={small_disk.parent / 'xla_cache'}")
  full = run_helpers.run_main(workdir, flags, timeout=900)
  assert full.returncode == 2, full.stderr[-3000:]
  output = (full.stdout + full.stderr).strip().splitlines()
  # Orbax's threads fail with tracebacks (one per write in flight): none reach the console.
  assert len(output) <= 20 and "Traceback" not in full.stderr, full.stderr[-3000:]
  line = output[-1]
  assert line.startswith("error: no space left on the device writing ") and len(line) < 300, line
  assert f"{workdir}/checkpoints/8" in line and " free; a checkpoint here takes " in line, line
  warnings = [w for w in output if " failed (" in w]
  assert len(warnings) == 1, output
  named = re.search(
    r"saving checkpoint 8 failed \(No space left on device\); tracebacks in (\S+)$", warnings[0]
  )
  assert named, warnings[0]
  # The workdir's errors.log, or, when the full disk cannot take even that file (the save
  # filled it first: a race), one in the temp dir; either way the warning names it.
  log = pathlib.Path(named.group(1))
  assert log == workdir / "errors.log" or log.parent == pathlib.Path(tempfile.gettempdir()), log
  tracebacks = log.read_text()
  if log.parent != workdir:
    log.unlink()
  assert "Traceback (most recent call last)" in tracebacks
  # Which write finds the disk full first is a race: TensorStore's (its error names the file in
  # the step's temporary directory), or, now and then, Orbax's metadata written from Python (an
  # OSError without a path).
  if "os_error_code=" in tracebacks:
    assert f"{workdir}/checkpoints/8.orbax-checkpoint-tmp" in tracebacks
  else:
    assert "OSError: [Errno 28] No space left on device" in tracebacks, tracebacks[-3000:]
  assert run_helpers.checkpoint_steps(workdir) == [4]
  step_4 = run_helpers.restore_params(workdir, 4)  # Intact: it restores.

  subprocess.run(["mount", "-o", "remount,size=80m", str(small_disk)], check=True)
  resumed = run_helpers.run_main(workdir, flags, timeout=900)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"Resuming from {workdir}/checkpoints/4" in resumed.stderr
  assert run_helpers.checkpoint_steps(workdir) == [4, 8]
  assert [r["step"] for r in run_helpers.read_metrics(workdir)] == [4, 8, 8]  # 8 twice: resumed.
  assert run_helpers.restore_params(workdir, 4).keys() == step_4.keys()


def test_a_write_to_a_full_device_names_the_path_and_the_free_space():
  with pytest.raises(OSError) as raised:
    with open("/dev/full", "w", encoding="utf-8") as full:
      full.write("x")
  assert raised.value.errno == errno.ENOSPC
  raised.value.filename = "/dev/full"
  line, status = error_lines.describe(raised.value)
  assert status == 2
  assert re.match(
    r"error: no space left on the device writing /dev/full \([\d.]+ [KMGT]?B free\)", line
  )


def test_a_metrics_row_that_finds_the_disk_full_names_metrics_jsonl(tmp_path):
  """Python reports a failed flush without the file: the run's line names it."""
  writer = metrics_writer.MetricsWriter(str(tmp_path), total_steps=4)
  writer._jsonl.close()  # pylint: disable=protected-access
  full = open("/dev/full", "w", encoding="utf-8")  # pylint: disable=consider-using-with
  writer._jsonl = full  # pylint: disable=protected-access
  with pytest.raises(OSError) as raised:
    writer.write(1, "train", {"loss": 1.0})
  with pytest.raises(OSError):
    full.close()  # The row is still buffered: closing fails too, and closes.
  line, status = error_lines.describe(raised.value)
  assert status == 2
  assert line.startswith(f"error: no space left on the device writing {tmp_path}/metrics.jsonl ")


def _raised_by_the_save_of_step_8(workdir, failure):
  """What a checkpointer raises when its save of step 8 failed with ``failure``."""
  checkpointer = checkpointing.Checkpointer(str(workdir))
  checkpointer._saving = 8  # pylint: disable=protected-access
  try:
    with pytest.raises(Exception) as raised:
      with checkpointer._failure_warning():  # pylint: disable=protected-access
        raise failure
  finally:
    checkpointer.close()
  return raised.value


@pytest.mark.parametrize(
  "failure",
  [
    ValueError("RESOURCE_EXHAUSTED: Error writing to the OCDBT manifest [os_error_code='28']"),
    OSError(errno.ENOSPC, "No space left on device"),
  ],
  ids=["storage_error_without_a_file", "os_error_without_a_file"],
)
def test_a_failed_save_on_a_full_disk_names_the_step_directory(tmp_path, failure):
  """TensorStore and Python do not always say which file found the disk full: the line names
  the checkpoint being saved, not the current directory's disk."""
  raised = _raised_by_the_save_of_step_8(tmp_path, failure)
  assert isinstance(raised, OSError) and raised.__cause__ is failure
  line, status = error_lines.describe(raised)
  assert status == 2
  assert line.startswith(f"error: no space left on the device writing {tmp_path}/checkpoints/8 ")


def test_a_failed_save_for_another_reason_is_raised_unchanged(tmp_path):
  failure = ValueError('PERMISSION_DENIED: Failed writing: "/x/checkpoints/8/d"')
  assert _raised_by_the_save_of_step_8(tmp_path, failure) is failure


class _ClosedLoopCallback:
  """Raises where nobody can catch it, as TensorStore's callbacks into a closed loop do."""

  def __del__(self):
    raise RuntimeError("Event loop is closed")


def test_background_errors_go_to_the_log_file_not_the_console(tmp_path, capfd, caplog):
  log = tmp_path / "errors.log"
  errors = background_errors.BackgroundErrors(str(log))
  hooks = (threading.excepthook, sys.unraisablehook, sys.excepthook)
  errors.install()
  try:
    assert not log.exists() and not errors.failed  # Created on the first error only.
    absl_logging.warning("a warning of ours still shows")
    thread = threading.Thread(target=lambda: 1 / 0, name="array_type_handler")
    thread.start()
    thread.join()
    _ClosedLoopCallback()
    try:
      raise ValueError("RESOURCE_EXHAUSTED: [os_error_code='28']")
    except ValueError:
      orbax_failure = logging.makeLogRecord(
        {
          "name": "absl",
          "levelno": logging.ERROR,
          "levelname": "ERROR",
          "pathname": "/site-packages/orbax/checkpoint/_src/futures/future.py",
          "msg": "_SignalingThread.run() raised an exception",
          "exc_info": sys.exc_info(),
        }
      )
      logging.getLogger("absl").handle(orbax_failure)
      assert background_errors.cause(sys.exc_info()[1]) == "No space left on device"
  finally:
    errors.uninstall()
  assert (threading.excepthook, sys.unraisablehook, sys.excepthook) == hooks
  # The same words when the save fails writing a file from Python (the race in the run above).
  full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "checkpoints/8/_METADATA")
  assert background_errors.cause(full) == "No space left on device"
  assert background_errors.cause(ValueError("bad\nmore")) == "ValueError: bad"
  assert "Traceback" not in capfd.readouterr().err
  assert [r.getMessage() for r in caplog.records] == ["a warning of ours still shows"]
  assert errors.failed and errors.log_path == str(log)
  text = log.read_text()
  assert text.count("Traceback (most recent call last)") == 3, text
  for expected in (
    "uncaught exception in thread array_type_handler",
    "ZeroDivisionError",
    "RuntimeError: Event loop is closed",
    "_SignalingThread.run() raised an exception",
    "os_error_code='28'",
  ):
    assert expected in text, expected
