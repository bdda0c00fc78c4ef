"""Profiler traces of chosen train steps, written into the workdir for TensorBoard / XProf.

``profile_num_steps`` > 0 traces the optimizer updates that start at
``state.step == profile_start_step`` (so ``profile_start_step=10, profile_num_steps=5`` traces
updates 11..15 in the 1-based numbering of the logs; skip the first steps, which compile). The
trace goes to ``<workdir>/profile/plugins/profile/<timestamp>/<host>.xplane.pb``: view it with
``tensorboard --logdir=<workdir>/profile`` (Profile tab) or XProf. Any filesystem jax's
profiler can write works, ``gs://`` included. Only process 0 traces: every host runs the same
program, and one host's trace keeps the files small and the names unique.
"""

import jax
from absl import logging
from etils import epath

from bert_jax.errors import UserInputError

PROFILE_DIR = "profile"


class StepProfiler:
  """Starts `jax.profiler` before the first chosen step and stops it after the last one.

  Call `before_step` before dispatching each step and `after_step` right after; `close` stops
  a trace that the run left unfinished (an early exit or preemption).
  """

  def __init__(self, workdir: epath.Path, start_step: int, num_steps: int):
    if start_step < 0 or num_steps < 0:
      raise UserInputError(
        f"profile_start_step={start_step} and profile_num_steps={num_steps} must be >= 0; "
        "set profile_num_steps=0 to turn profiling off"
      )
    self.directory = epath.Path(workdir) / PROFILE_DIR
    self._start, self._end = start_step, start_step + num_steps
    self._enabled = num_steps > 0 and jax.process_index() == 0
    self._tracing = False
    self._annotation = None

  def before_step(self, step: int):
    """``step`` = updates already done (``state.step`` before this one)."""
    if not self._enabled or not self._start <= step < self._end:
      return
    if not self._tracing:
      logging.info("profiling steps %d-%d into %s", step + 1, self._end, self.directory)
      jax.profiler.start_trace(str(self.directory))
      self._tracing = True
    # Step markers let the trace viewer split time per step.
    self._annotation = jax.profiler.StepTraceAnnotation("train", step_num=step)
    self._annotation.__enter__()

  def after_step(self, step: int, outputs):
    """Ends the step's marker; after the last chosen step, waits for ``outputs`` and stops."""
    if not self._tracing:
      return
    self._annotation.__exit__(None, None, None)
    self._annotation = None
    if step + 1 >= self._end:
      jax.block_until_ready(outputs)  # The device work of the last step belongs in the trace.
      self.close()

  def close(self):
    """Stops and writes the trace if one is running."""
    if self._annotation is not None:
      self._annotation.__exit__(None, None, None)
      self._annotation = None
    if self._tracing:
      jax.profiler.stop_trace()
      self._tracing = False
      logging.info("wrote the profile to %s", self.directory)
