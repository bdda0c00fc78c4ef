"""Reads plain-text corpora in the original BERT format into documents of sentences.

Format: one sentence per line, documents separated by blank lines; ``.gz`` files are read
through gzip. Lines that are not valid UTF-8 are skipped, counted and the count logged: a
corrupt file shows up in the logs instead of silently shrinking the corpus. Paths and globs go
through `bert_jax.data.files`, so corpora may live on ``gs://`` as well as on local disk.
"""

from absl import logging

from bert_jax.data import files
from bert_jax.errors import UserInputError

_GLOB_CHARS = frozenset("*?[")


def expand_paths(paths):
  """Expands glob patterns in ``paths`` (sorted, so every host sees the same order).

  Raises:
    FileNotFoundError: a path does not exist or a pattern matches nothing.
  """
  if isinstance(paths, str):
    paths = (paths,)
  if not paths:
    raise UserInputError("no corpus files given; set data.corpus_paths to one or more text files")
  expanded = []
  for path in paths:
    if _GLOB_CHARS & set(path):
      matches = files.glob(path)
      if not matches:
        raise FileNotFoundError(f"corpus pattern {path} matches no files; check data.corpus_paths")
      expanded.extend(matches)
    elif not files.is_file(path):
      raise FileNotFoundError(
        f"corpus file {path} {files.missing_file_reason(path)}; set data.corpus_paths to text "
        "files with one sentence per line and blank lines between documents"
      )
    else:
      expanded.append(path)
  return expanded


def check_mostly_text(path, num_undecodable: int, num_text_lines: int):
  """Refuses a binary file: more undecodable lines than lines of text (not a stray byte).

  Raises:
    UserInputError: naming ``path`` as not UTF-8 text.
  """
  if num_undecodable > num_text_lines:
    raise UserInputError(
      f"corpus file {path} is not UTF-8 text ({num_undecodable} undecodable lines, "
      f"{num_text_lines} of text); point at text files with one sentence per line"
    )


def read_documents_from_file(path):
  """Reads one text file into documents.

  Args:
    path: a text file (or ``.gz``) in the BERT format.

  Returns:
    ``(documents, num_undecodable_lines)``: documents are lists of stripped, non-empty sentence
    strings; the count is of lines skipped because they are not valid UTF-8.

  Raises:
    FileNotFoundError: the file does not exist.
    ValueError: the file holds no text.
  """
  if not files.is_file(path):
    raise FileNotFoundError(
      f"corpus file {path} {files.missing_file_reason(path)}; set data.corpus_paths to text "
      "files with one sentence per line and blank lines between documents"
    )
  documents = []
  current = []
  num_undecodable = 0
  with files.open_binary(path) as f:
    for raw_line in f:
      try:
        line = raw_line.decode("utf-8").strip()
      except UnicodeDecodeError:
        # Skip only the bad line: one stray byte should not end the document it sits in.
        num_undecodable += 1
        continue
      if line:
        current.append(line)
      elif current:
        documents.append(current)
        current = []
  if current:
    documents.append(current)
  if num_undecodable:
    logging.warning("skipped %d lines of %s that are not valid UTF-8", num_undecodable, path)
  check_mostly_text(path, num_undecodable, sum(map(len, documents)))
  if not documents:
    raise UserInputError(
      f"corpus file {path} contains no text; it needs one sentence per line with blank lines "
      "between documents"
    )
  return documents, num_undecodable


def read_documents(paths):
  """Reads BERT-format text files into one list of documents, in file order.

  Args:
    paths: a path, a glob pattern or a sequence of them.

  Returns:
    A list of documents, each a list of sentence strings.

  Raises:
    FileNotFoundError: a file is missing or a pattern matches nothing.
    ValueError: a file holds no text.
  """
  documents = []
  total_undecodable = 0
  files = expand_paths(paths)
  for path in files:
    file_documents, num_undecodable = read_documents_from_file(path)
    documents.extend(file_documents)
    total_undecodable += num_undecodable
  logging.info(
    "read %d documents, %d sentences from %d files (%d non-UTF-8 lines skipped)",
    len(documents),
    sum(len(d) for d in documents),
    len(files),
    total_undecodable,
  )
  return documents
