"""Data files on local disk or on ``gs://`` alike, through TensorFlow's filesystem layer.

Every reader of corpora, vocabularies, records and task files opens them here, so a path may
be ``/data/x`` or ``gs://bucket/x`` (any scheme ``tf.io.gfile`` knows). A missing file raises
`FileNotFoundError`, as the builtin ``open`` does, on every filesystem. TensorFlow is imported
on first use.
"""

import contextlib
import gzip
import os

from bert_jax import environment


def _gfile():
  return environment.import_tensorflow_for_data().io.gfile


def glob(pattern: str) -> list:
  """Paths matching ``pattern``, sorted (every host sees the same order)."""
  return sorted(_gfile().glob(pattern))


def is_file(path: str) -> bool:
  gfile = _gfile()
  return gfile.exists(path) and not gfile.isdir(path)


def is_dir(path: str) -> bool:
  return _gfile().isdir(path)


def missing_file_reason(path: str) -> str:
  """Why ``path`` is not a readable file, in words ("does not exist" or "is a directory")."""
  return "is a directory, not a file" if is_dir(path) else "does not exist"


def _require_file(path: str):
  if not is_file(path):
    raise FileNotFoundError(f"{path} {missing_file_reason(path)}")


@contextlib.contextmanager
def open_binary(path: str):
  """The file's bytes as a binary file object (iterable by line); ``.gz`` is decompressed."""
  _require_file(path)
  with _gfile().GFile(path, "rb") as f:
    if path.endswith(".gz"):
      with gzip.GzipFile(fileobj=f, mode="rb") as unzipped:
        yield unzipped
    else:
      yield f


def read_bytes(path: str) -> bytes:
  with open_binary(path) as f:
    return f.read()


def read_text(path: str, encoding: str = "utf-8") -> str:
  """The whole file decoded; undecodable bytes raise `UnicodeDecodeError`."""
  return read_bytes(path).decode(encoding)


def write_text(path: str, text: str):
  with _gfile().GFile(path, "w") as f:
    f.write(text)


def makedirs(path: str):
  """Creates a folder and its parents if missing (on object stores: nothing to create)."""
  _gfile().makedirs(path)


def absolute_path(path: str) -> str:
  """``path`` made absolute if it is local; URLs such as ``gs://bucket/x`` already are."""
  return path if "://" in path else os.path.abspath(path)
