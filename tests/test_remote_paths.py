"""Data on a non-local filesystem, and no local-only file calls where runs read or write files.

Cloud runs keep corpora, vocabularies, TFRecords and workdirs on ``gs://``. GCS itself is out
of reach offline, so the data path is exercised on TensorFlow's in-memory ``ram://`` filesystem:
a real non-POSIX filesystem behind the same ``tf.io.gfile`` layer that serves ``gs://``. The
workdir side (config.json, metrics, TensorBoard, checkpoints, profiles) goes through epath,
Orbax, tf.summary and jax.profiler, which take ``gs://`` paths themselves; the source audit
below keeps builtin ``open`` / ``os.path`` / ``glob`` out of those modules.
"""

import ast
import dataclasses
import gzip
import pathlib
import uuid

import pytest

from bert_jax.data import (
  default_corpus,
  pretraining_config,
  pretraining_pipeline,
  record_format,
  text_corpus,
)
from bert_jax.tools import create_pretraining_data
from tests import helpers

tf = record_format.tf
SEQ_LEN = 64
REPO = pathlib.Path(__file__).resolve().parents[1]


def _write_corpus(directory):
  """12 documents of the embedded corpus in two files (one gzipped) under ``directory``."""
  documents = text_corpus.read_documents(default_corpus.default_corpus_path())[:12]
  tf.io.gfile.makedirs(directory)
  text = ["\n\n".join("\n".join(d) for d in part) + "\n" for part in (documents[:6], documents[6:])]
  with tf.io.gfile.GFile(f"{directory}/part0.txt", "w") as f:
    f.write(text[0])
  with tf.io.gfile.GFile(f"{directory}/part1.txt.gz", "wb") as f:
    f.write(gzip.compress(text[1].encode("utf-8"), mtime=0))
  tf.io.gfile.copy(default_corpus.default_vocab_path(), f"{directory}/vocab.txt")
  return documents


def _records_config(directory):
  return pretraining_config.PretrainingDataConfig(
    tfrecord_pattern=f"{directory}/records/train-*.tfrecord",
    eval_tfrecord_pattern=f"{directory}/records/eval-*.tfrecord",
    vocab_path=f"{directory}/vocab.txt",
    max_seq_length=SEQ_LEN,
    max_predictions_per_seq=10,
    shuffle_buffer_size=64,
  )


def _first_batches(config, split, count):
  batches = pretraining_pipeline.PretrainingData(config).batches(
    split=split, seed=0, global_batch_size=4
  )
  return [next(batches) for _ in range(count)]


def test_corpus_vocab_and_records_on_a_non_local_filesystem(tmp_path):
  remote = f"ram://{uuid.uuid4().hex}"
  local = str(tmp_path)
  for directory in (remote, local):
    documents = _write_corpus(directory)
    argv = [
      f"--input={directory}/part*",
      f"--output_dir={directory}/records",
      f"--vocab={directory}/vocab.txt",
      f"--max_seq_length={SEQ_LEN}",
      "--num_shards=2",
      "--eval_fraction=0.2",
    ]
    assert create_pretraining_data.main(["create_pretraining_data", *argv]) == 0
  assert text_corpus.read_documents(f"{remote}/part*") == documents
  # The tool wrote the same shards to both filesystems, byte for byte.
  names = sorted(p.rsplit("/", 1)[1] for p in tf.io.gfile.glob(f"{remote}/records/*"))
  assert names == sorted(p.name for p in (tmp_path / "records").iterdir())
  assert "metadata-00000.json" in names and "train-00001-of-00002.tfrecord" in names
  for name in names:
    if name.endswith(".tfrecord"):
      with tf.io.gfile.GFile(f"{remote}/records/{name}", "rb") as f:
        assert f.read() == (tmp_path / "records" / name).read_bytes(), name
  # Training reads them (metadata, vocab, shards) into the same batches as from local disk.
  for split in ("train", "eval"):
    helpers.assert_same_batches(
      _first_batches(_records_config(remote), split, 2),
      _first_batches(_records_config(local), split, 2),
    )
  missing = dataclasses.replace(
    _records_config(remote), tfrecord_pattern=f"{remote}/nothing/train-*.tfrecord"
  )
  with pytest.raises(FileNotFoundError, match=f"{remote}/nothing/train-.* matches no files"):
    pretraining_pipeline.PretrainingData(missing)


# Modules that read or write run data or workdirs; tools that only touch local files by design
# (vocab training, corpus building, benchmarks) are not listed.
_AUDITED = (
  "bert_jax/data",
  "bert_jax/train",
  "bert_jax/tasks",
  "bert_jax/models",
  "bert_jax/parallel",
  "bert_jax/main.py",
  "bert_jax/tools/create_pretraining_data.py",
)
_LOCAL_ONLY_CALLS = {
  "open",
  "os.makedirs",
  "os.listdir",
  "os.remove",
  "os.rename",
  "os.path.isfile",
  "os.path.isdir",
  "os.path.exists",
  "os.path.getsize",
  "os.path.abspath",
  "glob.glob",
  "gzip.open",
  "shutil.copyfile",
  "shutil.copy",
  "shutil.rmtree",
  "pathlib.Path",
}


def _dotted(node):
  if isinstance(node, ast.Name):
    return node.id
  if isinstance(node, ast.Attribute):
    base = _dotted(node.value)
    return base and f"{base}.{node.attr}"
  return None


def test_run_files_go_through_gfile_epath_or_orbax():
  sources = []
  for entry in _AUDITED:
    path = REPO / entry
    sources.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
  # files.py is the one place that turns local paths absolute.
  sources = [s for s in sources if s != REPO / "bert_jax/data/files.py"]
  assert len(sources) > 20
  found = [
    f"{source.relative_to(REPO)}:{node.lineno} {_dotted(node.func)}"
    for source in sources
    for node in ast.walk(helpers.parse_python(source))
    if isinstance(node, ast.Call) and _dotted(node.func) in _LOCAL_ONLY_CALLS
  ]
  assert not found, (
    "local-only file calls; use bert_jax.data.files (tf.io.gfile) or epath "
    f"so gs:// paths work: {found}"
  )
