"""Streaming create_pretraining_data: bounded windows, determinism, identity, progress."""

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from bert_jax.data import (
  default_corpus,
  streaming_pretraining,
  text_corpus,
  tokenization,
  tokenized_corpus,
)
from bert_jax.tools import create_pretraining_data

SEQ_LEN = 64


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
  documents = text_corpus.read_documents(default_corpus.default_corpus_path())[:60]
  path = tmp_path_factory.mktemp("text") / "corpus.txt"
  path.write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
  return str(path)


def _create(module, text_file, output_dir, *extra):
  argv = [
    f"--input={text_file}",
    f"--output_dir={output_dir}",
    f"--vocab={default_corpus.default_vocab_path()}",
    f"--max_seq_length={SEQ_LEN}",
    "--num_shards=2",
    "--eval_fraction=0.1",
    *extra,
  ]
  if module is create_pretraining_data:  # absl flags, after the program name.
    argv = ["create_pretraining_data", *argv]
  assert module.main(argv) == 0
  return {
    name: open(os.path.join(output_dir, name), "rb").read()
    for name in sorted(os.listdir(output_dir))
  }


def test_windows_are_bounded():
  sizes = [len(w) for w in streaming_pretraining.windows(iter(range(103)), 10)]
  assert sum(sizes) == 103 and max(sizes) <= 15 and min(sizes) >= 5


def test_windows_keep_no_reference_to_what_they_yield():
  """The caller frees a window's text once it is tokenised (bounded memory needs it)."""
  stream = streaming_pretraining.windows(iter(range(40)), 10)
  first = next(stream)
  second = next(stream)  # While the generator waits with the third.
  assert sys.getrefcount(first) == sys.getrefcount(second) == 2  # The name and the argument.


def test_a_window_is_tokenised_in_groups_as_one_batch(text_file, monkeypatch):
  documents = text_corpus.read_documents(text_file)[:7] + [["", " "]]  # Last: no tokens.
  tokenizer = tokenization.load_wordpiece(default_corpus.default_vocab_path())
  whole = tokenized_corpus.tokenize_documents(documents, tokenizer)
  monkeypatch.setattr(streaming_pretraining, "_TOKENIZE_GROUP_DOCUMENTS", 3)
  window = list(documents)
  grouped = streaming_pretraining._tokenize_window(window, tokenizer)  # pylint: disable=protected-access
  assert window == [] and grouped.num_documents == 7
  for field in ("token_ids", "sentence_starts", "document_starts"):
    np.testing.assert_array_equal(getattr(grouped, field), getattr(whole, field))
    assert getattr(grouped, field).dtype == getattr(whole, field).dtype


def test_same_seed_same_bytes_over_several_windows(text_file, tmp_path):
  first = _create(create_pretraining_data, text_file, tmp_path / "a", "--window_documents=8")
  second = _create(create_pretraining_data, text_file, tmp_path / "b", "--window_documents=8")
  assert first == second
  other = _create(
    create_pretraining_data, text_file, tmp_path / "c", "--window_documents=8", "--seed=7"
  )
  assert other["train-00000-of-00002.tfrecord"] != first["train-00000-of-00002.tfrecord"]


def test_one_window_is_byte_identical_to_the_in_memory_tool(text_file, tmp_path):
  """The pre-streaming tool (from git) and one window give the same files."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  try:
    source = subprocess.run(
      ["git", "-C", root, "show", "4c7ff74:bert_jax/tools/create_pretraining_data.py"],
      check=True,
      capture_output=True,
      text=True,
    ).stdout
  except (OSError, subprocess.CalledProcessError):
    pytest.skip("no git history to compare with")
  old_path = tmp_path / "old_create_pretraining_data.py"
  old_path.write_text(source)
  spec = importlib.util.spec_from_file_location("old_create_pretraining_data", old_path)
  old = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(old)
  for style in ("pairs", "full_sentences"):
    before = _create(old, text_file, tmp_path / f"old_{style}", f"--style={style}")
    after = _create(
      create_pretraining_data, text_file, tmp_path / f"new_{style}", f"--style={style}"
    )
    assert {k: v for k, v in before.items() if k.endswith(".tfrecord")} == {
      k: v for k, v in after.items() if k.endswith(".tfrecord")
    }


def test_progress_line(text_file, tmp_path):
  lines = []
  counter = streaming_pretraining._ByteCounter()  # pylint: disable=protected-access
  progress = streaming_pretraining.Progress(
    100, counter, every_s=0.0, log=lambda fmt, *a: lines.append(fmt % a)
  )
  counter.bytes = 50
  progress.update(3, 300)
  assert "documents" in lines[0] and "tokens" in lines[0] and "ETA" in lines[0]
