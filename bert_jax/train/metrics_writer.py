"""Writes metrics to ``metrics.jsonl``, TensorBoard event files and the console (process 0)."""

import contextlib
import json
import time

import jax
from absl import logging
from etils import epath

from bert_jax import environment


def _format_duration(seconds: float) -> str:
  seconds = int(max(seconds, 0))
  hours, rest = divmod(seconds, 3600)
  minutes, seconds = divmod(rest, 60)
  return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


class MetricsWriter:
  """One writer for the three metric sinks of the workdir (docs/operations.md).

  Only process 0 writes; other processes' calls are no-ops, so callers need no checks.
  """

  def __init__(self, workdir: str, total_steps: int):
    self._total_steps = total_steps
    self._active = jax.process_index() == 0
    self._start_time = time.monotonic()
    self._start_step = None
    if not self._active:
      return
    workdir = epath.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    self._jsonl_path = workdir / "metrics.jsonl"
    self._jsonl = self._jsonl_path.open("a")
    tf = environment.import_tensorflow_for_data()
    self._tf = tf
    self._summary_writer = tf.summary.create_file_writer(str(workdir / "tensorboard"))

  def write(self, step: int, split: str, metrics: dict):
    """Records one row: ``{"step", "split", **metrics}`` (floats)."""
    if not self._active:
      return
    row = {"step": int(step), "split": split}
    row.update({k: float(v) for k, v in metrics.items()})
    with self._naming_the_file():
      self._jsonl.write(json.dumps(row) + "\n")
      self._jsonl.flush()
    with self._summary_writer.as_default(step=int(step)):
      for name, value in row.items():
        if name not in ("step", "split"):
          self._tf.summary.scalar(f"{split}/{name}", value)
    self._summary_writer.flush()
    self._log(row)

  def _log(self, row):
    step = row["step"]
    if self._start_step is None:
      self._start_step = step
      self._start_time = time.monotonic()
    shown = " ".join(f"{k} {v:.4g}" for k, v in row.items() if k not in ("step", "split"))
    progress = f"step {step}/{self._total_steps} ({100.0 * step / self._total_steps:.0f}%)"
    done = step - self._start_step
    if row["split"] == "train" and done > 0:
      eta = (time.monotonic() - self._start_time) / done * (self._total_steps - step)
      progress += f" ETA {_format_duration(eta)}"
    logging.info("[%s] %s | %s", row["split"], progress, shown)

  def close(self):
    if self._active:
      with self._naming_the_file():
        self._jsonl.close()
      self._summary_writer.close()

  @contextlib.contextmanager
  def _naming_the_file(self):
    """A failed write of a buffered file raises an OSError without a path (a full disk):
    give it the file's, so the run's error line names where the disk is full."""
    try:
      yield
    except OSError as error:
      if error.filename:
        raise
      raise OSError(error.errno, error.strerror, str(self._jsonl_path)) from error
