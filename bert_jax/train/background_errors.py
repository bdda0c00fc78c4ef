"""Errors on background threads (Orbax's asynchronous saves) go to a log file, not the console.

A failed asynchronous save (a full disk) makes Orbax log the failure from each of its threads
with a traceback, and TensorStore writes still in flight call back into an event loop Orbax
already closed ("RuntimeError: Event loop is closed"), each printing one more traceback: pages
of them in the job log, burying the one ``error:`` line the run ends with. While a
`BackgroundErrors` is installed, all of them are appended to one file
(``<workdir>/errors.log``); the checkpointer logs one warning naming the step, the cause and
that file.
"""

import errno
import logging
import os
import re
import sys
import tempfile
import threading
import traceback

from etils import epath

# Loggers whose ERROR records come from background work: Orbax logs through absl's logger;
# asyncio reports exceptions nobody retrieved on its own.
_LOGGERS = ("absl", "asyncio")
_OS_ERROR_CODE = re.compile(r"os_error_code='?(\d+)")


def _library_error(record: logging.LogRecord) -> bool:
  return record.levelno >= logging.ERROR and (
    record.name == "asyncio" or f"{os.sep}orbax{os.sep}" in record.pathname
  )


def cause(error: BaseException) -> str:
  """A few words on why ``error`` happened: the OS error a storage failure is or carries (a
  save fails as TensorStore's error or, writing a small file from Python, as an `OSError`),
  else its type and first line."""
  if isinstance(error, OSError) and error.errno:
    return os.strerror(error.errno)
  text = str(error)
  code = _OS_ERROR_CODE.search(text)
  if code:
    return os.strerror(int(code.group(1)))
  first = (text.strip().splitlines() or [""])[0]
  return f"{type(error).__name__}: {first}"[:160]


def is_disk_full(error: BaseException) -> bool:
  """Whether ``error`` is a full disk: an OSError, or a storage error carrying that OS error."""
  if isinstance(error, OSError):
    return error.errno == errno.ENOSPC
  code = _OS_ERROR_CODE.search(str(error))
  return bool(code and int(code.group(1)) == errno.ENOSPC) or "No space left" in str(error)


class BackgroundErrors(logging.Filter):
  """Routes background threads' errors and tracebacks to ``log_path`` while installed.

  Catches Orbax's (and asyncio's) ERROR log records, uncaught exceptions of threads
  (`threading.excepthook`) and exceptions raised in callbacks nobody can catch
  (`sys.unraisablehook`, `sys.excepthook` for C extensions' callbacks). The file is created
  on the first error only, so a run without one leaves no trace.

  Attributes:
    log_path: where the tracebacks are (a file in the temp dir if the workdir's could not be
      written: a full or remote disk).
    failed: whether anything was routed to the file.
  """

  def __init__(self, log_path: str):
    super().__init__()
    self.log_path = log_path
    self.failed = False
    self._lock = threading.Lock()
    self._installed = None
    self._fell_back = False

  def install(self):
    """Takes over the hooks and log records (idempotent)."""
    if self._installed is not None:
      return
    self._installed = (threading.excepthook, sys.unraisablehook, sys.excepthook)
    threading.excepthook = self._thread_exception
    sys.unraisablehook = self._unraisable
    sys.excepthook = self._uncaught
    for name in _LOGGERS:
      logging.getLogger(name).addFilter(self)

  def uninstall(self):
    """Gives the hooks and log records back."""
    if self._installed is None:
      return
    threading.excepthook, sys.unraisablehook, sys.excepthook = self._installed
    self._installed = None
    for name in _LOGGERS:
      logging.getLogger(name).removeFilter(self)

  def filter(self, record: logging.LogRecord) -> bool:
    """`logging.Filter`: keeps a library's error out of the console, in the file instead."""
    if not _library_error(record):
      return True
    text = f"{record.levelname} {record.pathname}:{record.lineno} {record.getMessage()}\n"
    if record.exc_info:
      text += "".join(traceback.format_exception(*record.exc_info))
    self._report(text)
    return False

  def _thread_exception(self, args):
    thread = args.thread.name if args.thread else "?"
    text = f"uncaught exception in thread {thread}:\n" + "".join(
      traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)
    )
    self._report(text)

  def _unraisable(self, unraisable):
    where = f" {unraisable.object!r}" if unraisable.object is not None else ""
    text = f"{unraisable.err_msg or 'Exception ignored in'}{where}:\n" + "".join(
      traceback.format_exception(
        unraisable.exc_type, unraisable.exc_value, unraisable.exc_traceback
      )
    )
    self._report(text)

  def _uncaught(self, exc_type, exc_value, exc_traceback):
    text = "uncaught exception:\n" + "".join(
      traceback.format_exception(exc_type, exc_value, exc_traceback)
    )
    self._report(text)

  def _report(self, text: str):
    with self._lock:
      self.failed = True
      self._append(text)

  def _append(self, text: str):
    """Appends to the log; on a full or remote workdir, to a file in the temp dir instead."""
    try:
      with epath.Path(self.log_path).open("a") as log:
        log.write(text.rstrip("\n") + "\n\n")
      return
    except Exception:  # pylint: disable=broad-except  # Never raise inside a hook (epath on gs:// may not append).
      if self._fell_back:
        return  # Nowhere left to write: drop it rather than raise inside a hook.
    self._fell_back = True
    self.log_path = os.path.join(tempfile.gettempdir(), f"bert_jax-{os.getpid()}-errors.log")
    self._append(text)
