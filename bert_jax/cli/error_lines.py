"""Turning an exception that ends a command into one short ``error:`` line and an exit status.

Every entry point (`bert_jax.main` and the tools, through `cli.run`) ends the same way: bad
input, a storage failure (permissions, a read-only or full disk, a file where a directory
belongs), text that is not UTF-8 or a broken config file becomes one line naming the problem
and the fix, exit status 2 (3 for a non-finite loss). Anything else is a bug and keeps its
traceback.
"""

import errno
import os
import re
import shutil
import traceback

from absl import flags

from bert_jax.errors import NonFiniteLossError, UserInputError
from bert_jax.models import config as model_config
from bert_jax.train import background_errors

# The last line of stderr stays readable in a terminal and in a job scheduler's summary.
MAX_LINE_CHARS = 299
USER_ERROR_EXIT = 2
NON_FINITE_EXIT = 3

# TensorStore (under Orbax) reports storage failures as ValueError with a status code and,
# for a failed write, the file and the OS error.
_STORAGE_STATUS = re.compile(r"\b(RESOURCE_EXHAUSTED|PERMISSION_DENIED|NOT_FOUND|DATA_LOSS)\b")
# The file TensorStore names, most specific first.
_FAILED_PATHS = (
  re.compile(r'Failed (?:writing|reading): "([^"]+)"'),
  re.compile(r'local file "([^"]+)"'),
  re.compile(r'(?:Error writing|Error reading)[^"]*"([^"]+)"'),
)
# A file inside a checkpoint being written: the step directory is what the user knows.
_CHECKPOINT_STEP = re.compile(r"^(.*/checkpoints/\d+)(?:\.orbax-checkpoint-tmp[^/]*)?(?:/|$)")
_OS_ERROR_CODE = re.compile(r"os_error_code='?(\d+)")
# ml_collections' words for a --config file it could not open.
_CONFIG_NOT_LOADED = re.compile(r"Failed loading config file.*?Attempted \[[^\]]*\]:\s+(\S+)", re.S)
_DID_YOU_MEAN = re.compile(r'Did you mean "([^"]+)" instead of "([^"]+)"')
_FIRST_NAME = re.compile(r"[A-Za-z_][\w.]*|$")
# absl's message for a flag marked required (`flags.mark_flag_as_required`) that is missing.
_REQUIRED_FLAG = re.compile(r"Flag (--\w+) must have a value other than None")
# A path long enough to push the rest of a line out: its first and last characters are kept.
_PATH_HEAD, _PATH_TAIL = 16, 40
_LONG_PATH = re.compile(r"(?:[a-z]+://|/)[^\s:;,'\"()]{" + str(_PATH_HEAD + _PATH_TAIL + 8) + ",}")


def _human_bytes(size: float) -> str:
  for unit in ("B", "KB", "MB", "GB", "TB"):
    if size < 1024 or unit == "TB":
      return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
    size /= 1024
  return f"{size:.1f} TB"


def _existing_ancestor(path: str) -> str:
  path = os.path.abspath(path)
  while not os.path.exists(path) and os.path.dirname(path) != path:
    path = os.path.dirname(path)
  return path


def _checkpoint_size(path: str) -> int:
  """Bytes of the newest finished ``checkpoints/<step>`` next to ``path``; 0 if none."""
  match = re.search(r"^(.*/checkpoints)/", path)
  if not match or not os.path.isdir(match.group(1)):
    return 0
  steps = sorted((int(n) for n in os.listdir(match.group(1)) if n.isdigit()), reverse=True)
  for step in steps[:1]:
    total = 0
    for root, _, files in os.walk(os.path.join(match.group(1), str(step))):
      total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total
  return 0


def disk_full_line(path: str) -> str:
  """What a full disk at ``path`` means for the user: free space now, and what a save needs."""
  free = shutil.disk_usage(_existing_ancestor(path)).free
  needed = _checkpoint_size(path)
  step = _CHECKPOINT_STEP.match(path)
  path = step.group(1) if step else path
  need = f"; a checkpoint here takes {_human_bytes(needed)}" if needed else ""
  return (
    f"no space left on the device writing {path} ({_human_bytes(free)} free{need}); free "
    "space or move the workdir, then run the same command again to resume from the last "
    "checkpoint"
  )


def _os_error_line(error: OSError) -> str:
  path = error.filename or ""
  if error.filename2:
    path = f"{path} -> {error.filename2}"
  where = f" {path}" if path else ""
  fixes = {
    errno.ENOSPC: None,
    errno.EACCES: f"permission denied on{where}; make it accessible or choose another path",
    errno.EPERM: f"operation not permitted on{where}; make it accessible or choose another path",
    errno.EROFS: f"{path or 'the path'} is on a read-only file system; choose a writable path",
    errno.ENOTDIR: (
      f"{path or 'the path'}: a part of this path is a file, not a directory; "
      "choose a directory path"
    ),
    errno.EISDIR: f"{path or 'the path'} is a directory where a file was expected; name a file",
    errno.EEXIST: f"{path or 'the path'} already exists and is in the way; remove it or "
    "choose another path",
    errno.ENOENT: f"{path or 'a file'} does not exist; check the path",
  }
  if error.errno == errno.ENOSPC:
    return disk_full_line(error.filename or ".")
  if error.errno in fixes:
    return fixes[error.errno]
  return f"{error.strerror or error}{':' + where if where else ''}; check the path and the disk"


def _storage_value_error_line(error: ValueError) -> str | None:
  """A TensorStore storage failure as one line; None if ``error`` is not one."""
  text = str(error)
  status = _STORAGE_STATUS.search(text)
  if not status:
    return None
  matches = (pattern.search(text) for pattern in _FAILED_PATHS)
  path = next((m.group(1) for m in matches if m), "")
  if background_errors.is_disk_full(error):
    return disk_full_line(path or ".")
  code = _OS_ERROR_CODE.search(text)
  if code:
    number = int(code.group(1))
    return _os_error_line(OSError(number, os.strerror(number), path or None))
  first = text.strip().splitlines()[0][:160]
  return f"storage error ({first}); check the path, its permissions and the free space"


def _tensorflow_error_line(error: Exception) -> str | None:
  """tf.data's errors about input files (checked by name: importing TF here costs seconds)."""
  first = (str(error).strip().splitlines() or [""])[0][:160]
  fixes = {
    "DataLossError": "a record file is corrupt or truncated",
    "NotFoundError": "an input file does not exist",
    "PermissionDeniedError": "an input file cannot be read",
  }
  if type(error).__name__ == "FailedPreconditionError":  # e.g. "<path> is not a directory".
    return f"{first}; check the path (a file where a directory belongs?)"
  problem = fixes.get(type(error).__name__)
  if problem is None:
    return None
  return f"{problem} ({first}); check the files or write them again"


def _import_error_line(error: ImportError) -> str | None:
  """An optional dependency a tool needs; None for a broken import inside bert_jax (a bug)."""
  if "pip install" in str(error):  # Our own message, naming the package to install.
    return str(error)
  name = error.name or ""
  if isinstance(error, ModuleNotFoundError) and name and not name.startswith("bert_jax"):
    return f"the Python package {name} is not installed; pip install {name.split('.')[0]}"
  return None


def _decode_error_line(error: UnicodeDecodeError) -> str:
  byte = error.object[error.start : error.start + 1].hex()
  return (
    f"input is not UTF-8 text (byte 0x{byte} at offset {error.start}); convert the file to "
    "UTF-8 (e.g. iconv -t utf-8) or point at the text file, not a binary one"
  )


def _config_file_line(error: BaseException) -> str | None:
  """Errors that loading a ``--config`` file raises, as one line; None for others."""
  if isinstance(error, SyntaxError):
    return (
      f"the config file {error.filename} has a syntax error at line {error.lineno} "
      f"({error.msg}); fix the file"
    )
  return None


def config_file_arg(argv) -> str:
  """The path given as ``--config=<path>[:<arg>]`` ("" if none), as the user spelt it."""
  for i, arg in enumerate(argv):
    if arg.startswith(("--config=", "-config=")):
      return arg.split("=", 1)[1]
    if arg in ("--config", "-config") and i + 1 < len(argv):
      return argv[i + 1]
  return ""


def _chain(error: BaseException):
  """``error`` and the exceptions it was raised from or while handling, outermost first."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    yield error
    error = error.__cause__ or error.__context__


def _raised_in_config_file(error: BaseException, argv) -> str | None:
  """The line for an exception that the ``--config`` file's own code raised; None otherwise.

  ml_collections re-raises a TypeError / ValueError from ``get_config`` as a new one holding the
  formatted traceback (absl then wraps that in a flag error), so the exception the user's code
  raised is found in the chain by its traceback passing through the config file.
  """
  path = config_file_arg(argv[1:])
  if not path:
    return None
  if not os.path.isfile(path):
    path = path.rsplit(":", 1)[0]  # configs/x.py:<arg>
  if not os.path.isfile(path):
    return None
  for cause in _chain(error):
    lines = [
      frame.lineno
      for frame in traceback.extract_tb(cause.__traceback__)
      if os.path.isfile(frame.filename) and os.path.samefile(frame.filename, path)
    ]
    if lines:
      message = (str(cause).strip().splitlines() or [""])[0][:160]
      return _shorten(
        f"error: the config file {path} raised {type(cause).__name__} at line {lines[-1]}"
        f"{': ' + message if message else ''}; fix the file or its argument"
      )
  return None


def parse_error_line(error: BaseException, argv) -> str:
  """The ``error:`` line for an exception raised while parsing the command line.

  Parsing runs the ``--config`` file and applies ``--config.<key>`` overrides, so what fails
  there is the user's config file or flags, never the program.
  """
  required = _REQUIRED_FLAG.search(str(error))
  if required:
    return f"error: {required.group(1)} is required; see --help"
  missing = _CONFIG_NOT_LOADED.search(str(error))
  if missing:
    return _shorten(
      f"error: the config file {missing.group(1)} could not be loaded (it does not exist or "
      "is not readable); pass --config=configs/<name>.py"
    )
  raised = _raised_in_config_file(error, argv)
  if raised:
    return raised
  described = describe(error)
  if described is not None:
    return described[0]
  if "get_config" in str(error):
    return _shorten(
      "error: the --config file defines no get_config(); define get_config(arg=None) "
      "returning the ConfigDict (see configs/bert_tiny.py)"
    )
  if isinstance(error, (AttributeError, KeyError)):
    # ml_collections nests the KeyError's repr, e.g. '\\'hiden_size\\'\\nDid you mean ...'.
    text = str(error)
    suggestion = _DID_YOU_MEAN.search(text)
    key = suggestion.group(2) if suggestion else _FIRST_NAME.search(text).group(0)
    hint = f" (did you mean {suggestion.group(1)!r}?)" if suggestion else ""
    flag = next((a.split("=")[0] for a in argv if a.startswith("--config.") and key in a), "")
    if flag == f"--config.model.{key}" and key in model_config.MOVED_KEYS:
      return _shorten(f"error: {model_config.moved_key_message(key)}")
    return _shorten(
      f"error: the config has no key {key!r}{hint}; fix {flag or 'the --config.<key> flag'} "
      "(every key: bert_jax/default_config.py)"
    )
  first = (str(error).strip().splitlines() or [""])[0][:160]
  return _shorten(
    f"error: loading the --config file failed ({type(error).__name__}: {first}); fix the "
    "config file"
  )


def _shorten(line: str) -> str:
  """``line`` on one line of at most `MAX_LINE_CHARS`: long paths lose their middle first,
  the last path first (a path a library's message repeats), so the problem and the fix after
  them stay and the first path stays whole where it can."""
  line = " ".join(line.split())
  for match in reversed(list(_LONG_PATH.finditer(line))):
    if len(line) <= MAX_LINE_CHARS:
      break
    path = match.group(0)
    elided = f"{path[:_PATH_HEAD]}...{path[-_PATH_TAIL:]}"
    line = line[: match.start()] + elided + line[match.end() :]
  if len(line) > MAX_LINE_CHARS:
    line = line[: MAX_LINE_CHARS - 3] + "..."
  return line


def describe(error: BaseException) -> tuple[str, int] | None:
  """The one ``error:`` line and exit status for ``error``; None for a bug (keep the traceback).

  Args:
    error: the exception that ended the command.

  Returns:
    (line, status): the line has at most `MAX_LINE_CHARS` characters and names the problem
    and the fix.
  """
  if isinstance(error, NonFiniteLossError):
    return _shorten(f"error: {error}"), NON_FINITE_EXIT
  if isinstance(error, (UserInputError, flags.Error)):
    line = str(error)
  elif isinstance(error, OSError):
    line = _os_error_line(error)
  elif isinstance(error, UnicodeDecodeError):
    line = _decode_error_line(error)
  elif isinstance(error, SyntaxError):
    line = _config_file_line(error)
  elif isinstance(error, ImportError):
    line = _import_error_line(error)
  elif type(error).__module__.startswith("tensorflow"):
    line = _tensorflow_error_line(error)
  elif isinstance(error, ValueError):
    line = _storage_value_error_line(error)
  else:
    line = None
  if line is None:
    cause = error.__cause__ or error.__context__
    return describe(cause) if cause is not None and cause is not error else None
  return _shorten(f"error: {line}"), USER_ERROR_EXIT
