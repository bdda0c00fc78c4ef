"""`python -m bert_jax.main` as a process that skips the program's imports.

A run of the tiny configs spends about 6.5 of its first 10 s importing TensorFlow, jax, flax,
orbax and bert_jax. The tests start about two dozen such processes; instead of paying that each
time, each test worker keeps one fork server (Python's multiprocessing "forkserver") that has
imported them once, and every program starts as a fork of it: a process of its own, with its
own environment, working directory, stdout and stderr, that initialises jax's backend itself
(XLA_FLAGS, and so the number of fake devices, is read then) and runs `bert_jax.main` as
``python -m`` does, atexit handlers included. Signals, exit statuses and files behave as for
any child process.

What only a fresh interpreter shows (what the program imports and prints while importing)
is tested with real interpreters (tests/test_program_start.py).
"""

import atexit
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile

from bert_jax import environment as bert_jax_environment

# What every run of `bert_jax.main` imports (bert_jax.main itself runs as __main__ each time).
_PRELOAD = [
  "tensorflow",
  "jax",
  "flax.linen",
  "optax",
  "orbax.checkpoint",
  "bert_jax.default_config",
  "bert_jax.data.pretraining_pipeline",
  "bert_jax.train.loop",
]

_context = multiprocessing.get_context("forkserver")
_server_started = False


def _start_server(environment):
  """Starts the worker's fork server in ``environment`` (what the programs run in), so that
  TensorFlow is imported as the program imports it: quiet, and without Keras (see
  `bert_jax.environment.tensorflow_without_keras`)."""
  global _server_started
  from multiprocessing import forkserver  # pylint: disable=g-import-not-at-top

  saved = dict(os.environ)
  try:
    os.environ.clear()
    os.environ.update(environment)
    bert_jax_environment.tensorflow_without_keras()  # As `bert_jax.main.main` does first.
    _context.set_forkserver_preload(_PRELOAD)
    forkserver.ensure_running()
    _server_started = True
  finally:
    os.environ.clear()
    os.environ.update(saved)


def _run_module(module, argv, environment, cwd, stdout_path, stderr_path):
  """In the forked process: becomes ``python -m module argv...`` and exits with its status."""
  os.chdir(cwd)
  os.environ.clear()
  os.environ.update(environment)
  for fd, path in ((1, stdout_path), (2, stderr_path)):
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(target, fd)
    os.close(target)
  sys.argv = [module, *argv]
  status = 0
  try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
  except SystemExit as exit_:
    if isinstance(exit_.code, str):
      print(exit_.code, file=sys.stderr)
      status = 1
    else:
      status = exit_.code or 0
  except BaseException:  # pylint: disable=broad-except  (as the interpreter reports it)
    import traceback  # pylint: disable=g-import-not-at-top

    traceback.print_exc()
    status = 1
  atexit._run_exitfuncs()  # pylint: disable=protected-access  (what interpreter exit runs)
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(status)  # pylint: disable=protected-access


class Program:
  """A started program: the parts of `subprocess.Popen` the tests use."""

  def __init__(self, command, environment, cwd, stdout_path=None, stderr_path=None):
    """Starts ``command`` (``[python, "-m", module, *argv]``, as `run_helpers.main_command`
    makes it) with stdout and stderr appended to the given files (temporary ones when None)."""
    if command[1] != "-m":
      raise ValueError(f"not a `python -m` command: {command[:3]}")
    if not _server_started:
      _start_server(environment)
    self._files = tempfile.TemporaryDirectory()
    self.stdout_path = stdout_path or os.path.join(self._files.name, "stdout")
    self.stderr_path = stderr_path or os.path.join(self._files.name, "stderr")
    for path in (self.stdout_path, self.stderr_path):
      open(path, "a").close()  # pylint: disable=unspecified-encoding
    self._process = _context.Process(
      target=_run_module,
      args=(
        command[2],
        command[3:],
        dict(environment),
        str(cwd),
        self.stdout_path,
        self.stderr_path,
      ),
      daemon=False,
    )
    self._process.start()
    self.pid = self._process.pid
    self.args = command

  @property
  def returncode(self):
    return self._process.exitcode

  def poll(self):
    return self._process.exitcode

  def wait(self, timeout=None):
    self._process.join(timeout)
    if self._process.exitcode is None:
      raise subprocess.TimeoutExpired(self.args, timeout)
    return self._process.exitcode

  def send_signal(self, signal_number):
    if self._process.exitcode is None:
      os.kill(self.pid, signal_number)

  def kill(self):
    if self._process.exitcode is None:
      self._process.kill()
      self._process.join()

  def output(self):
    """(stdout, stderr) as text, as far as the program has written them."""
    with open(self.stdout_path, encoding="utf-8", errors="replace") as out:
      with open(self.stderr_path, encoding="utf-8", errors="replace") as err:
        return out.read(), err.read()

  def communicate(self, timeout=None):
    """Waits for the program (killing it after ``timeout``) and returns (stdout, stderr)."""
    try:
      self.wait(timeout)
    except subprocess.TimeoutExpired:
      self.kill()
      raise
    return self.output()


def run(command, environment, cwd, timeout):
  """`subprocess.run` of ``command`` with its output captured as text, as a `Program`."""
  program = Program(command, environment, cwd)
  try:
    stdout, stderr = program.communicate(timeout)
  finally:
    program.kill()
  return subprocess.CompletedProcess(command, program.returncode, stdout, stderr)
