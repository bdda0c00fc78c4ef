"""create_pretraining_data and the TFRecord source: determinism, packing, host shards, resume."""

import dataclasses
import glob
import json
import os

import numpy as np
import pytest

from bert_jax.data import (
  default_corpus,
  full_sentences,
  pretraining_config,
  pretraining_pipeline,
  record_format,
  text_corpus,
  tokenization,
  tokenized_corpus,
)
from bert_jax.tools import create_pretraining_data
from tests import helpers

tf = record_format.tf
SEQ_LEN = 64


@pytest.fixture(scope="module")
def text_files(tmp_path_factory):
  """The embedded corpus cut into 4 files of 10 documents."""
  documents = text_corpus.read_documents(default_corpus.default_corpus_path())[:40]
  directory = tmp_path_factory.mktemp("text")
  paths = []
  for part in range(4):
    path = directory / f"part{part}.txt"
    chunk = documents[part * 10 : (part + 1) * 10]
    path.write_text("\n\n".join("\n".join(d) for d in chunk) + "\n", encoding="utf-8")
    paths.append(str(path))
  return paths


def create(text_files, output_dir, *extra):
  argv = [
    f"--input={','.join(text_files)}",
    f"--output_dir={output_dir}",
    f"--vocab={default_corpus.default_vocab_path()}",
    f"--max_seq_length={SEQ_LEN}",
    "--num_shards=4",
    "--eval_fraction=0.1",
    *extra,
  ]
  assert create_pretraining_data.main(["create_pretraining_data", *argv]) == 0
  return str(output_dir)


@pytest.fixture(scope="module")
def records_dir(text_files, tmp_path_factory):
  return create(text_files, tmp_path_factory.mktemp("records"))


def read_all(pattern):
  dataset = tf.data.TFRecordDataset(sorted(glob.glob(pattern))).batch(1024)
  rows = list(dataset.map(lambda r: record_format.parse_batch(r, SEQ_LEN)).as_numpy_iterator())
  return {key: np.concatenate([row[key] for row in rows]) for key in rows[0]}


def data_for(directory, **overrides):
  config = pretraining_config.PretrainingDataConfig(
    tfrecord_pattern=os.path.join(directory, "train-*.tfrecord"),
    eval_tfrecord_pattern=os.path.join(directory, "eval-*.tfrecord"),
    max_seq_length=SEQ_LEN,
    max_predictions_per_seq=10,
    shuffle_buffer_size=64,
    **overrides,
  )
  return pretraining_pipeline.PretrainingData(config)


def take(iterator, count):
  return [next(iterator) for _ in range(count)]


def test_tool_is_deterministic_and_parallel_equals_serial(text_files, records_dir, tmp_path):
  again = create(text_files, tmp_path / "again")
  names = sorted(os.listdir(records_dir))
  assert names == sorted(os.listdir(again))
  assert [n for n in names if n.startswith("train")] == [
    f"train-0000{i}-of-00004.tfrecord" for i in range(4)
  ]
  for name in names:
    if name.endswith(".tfrecord"):
      with (
        open(os.path.join(records_dir, name), "rb") as a,
        open(os.path.join(again, name), "rb") as b,
      ):
        assert a.read() == b.read(), name
  # Two processes (a local worker pool) each take half of the input files and shards.
  pooled = create(text_files, tmp_path / "pooled", "--num_workers=2")
  serial = tmp_path / "serial"
  for index in (0, 1):
    create(text_files, serial, "--process_count=2", f"--process_index={index}")
  for name in sorted(os.listdir(pooled)):
    if name.endswith(".tfrecord"):
      with open(os.path.join(pooled, name), "rb") as a, open(serial / name, "rb") as b:
        assert a.read() == b.read(), name
  metadata = [json.loads((serial / f"metadata-0000{i}.json").read_text()) for i in (0, 1)]
  assert metadata[0]["input_files"] == text_files[0::2]
  assert sorted(metadata[0]["files"]) == [
    "eval-00000-of-00002.tfrecord",
    "train-00000-of-00004.tfrecord",
    "train-00002-of-00004.tfrecord",
  ]


def test_records_hold_the_sentence_pairs(records_dir):
  metadata = json.loads(open(os.path.join(records_dir, "metadata-00000.json")).read())
  train = read_all(os.path.join(records_dir, "train-*.tfrecord"))
  assert (
    len(train["input_ids"])
    == metadata["counts"]["train_sequences"]
    == sum(v for k, v in metadata["files"].items() if k.startswith("train"))
  )
  special = tokenization.load_wordpiece(default_corpus.default_vocab_path()).special_ids
  assert np.all(train["input_ids"][:, 0] == special.cls)
  assert np.all((train["input_ids"] == special.sep).sum(axis=1) == 2)
  np.testing.assert_array_equal(train["input_mask"] > 0, train["input_ids"] != special.pad)
  assert 0.4 < train["next_sentence_labels"].mean() < 0.6


def test_hosts_read_disjoint_records_covering_the_data(records_dir):
  data = data_for(records_dir)
  source = data.records
  everything = set()
  seen = []
  for process in (0, 1):
    _, counts = source.host_files(process, 2)
    stream = source.train_records(
      seed=1, global_batch_size=8, process_index=process, process_count=2, start_position=0
    )
    records = [r.numpy() for r, _ in stream.take(sum(counts))]
    assert len(set(records)) == sum(counts)
    seen.append(set(records))
    everything |= set(records)
  assert not seen[0] & seen[1]
  all_records = {r.numpy() for r in tf.data.TFRecordDataset(source.train_files)}
  assert everything == all_records


@pytest.mark.parametrize("process_count", [1, 2])
def test_exact_resume_across_epochs(records_dir, process_count):
  data = data_for(records_dir, masking="whole_word")
  batch_size = 16
  host_epoch = min(sum(data.records.host_files(p, process_count)[1]) for p in range(process_count))
  steps = host_epoch * process_count // batch_size + 3  # Past the first epoch boundary.
  for process in range(process_count):
    kwargs = dict(
      split="train",
      seed=3,
      global_batch_size=batch_size,
      process_index=process,
      process_count=process_count,
    )
    run = take(data.batches(**kwargs), steps)
    for step in (2, steps - 4):
      resumed = data.batches(**kwargs, start_position=step * batch_size)
      helpers.assert_same_batches(take(resumed, 3), run[step : step + 3])
    # Epochs are reshuffled: the second epoch does not replay the first.
    second_epoch = run[host_epoch // (batch_size // process_count)]
    assert not np.array_equal(run[0]["input_ids"], second_epoch["input_ids"])


def test_eval_split_is_fixed_and_hosts_concatenate(records_dir):
  data = data_for(records_dir)
  single = list(data.batches(split="eval", seed=0, global_batch_size=8))
  assert len(single) == data.records.num_eval_examples // 8 > 2
  helpers.assert_same_batches(single, list(data.batches(split="eval", seed=9, global_batch_size=8)))
  halves = [
    list(data.batches(split="eval", seed=0, global_batch_size=8, process_index=p, process_count=2))
    for p in (0, 1)
  ]
  joined = [
    {key: np.concatenate([a[key], b[key]]) for key in helpers.BATCH_KEYS} for a, b in zip(*halves)
  ]
  helpers.assert_same_batches(joined, single)


def test_full_sentences_rows_keep_documents_apart(text_files, tmp_path):
  directory = create(text_files, tmp_path / "full", "--style=full_sentences")
  metadata = json.loads(open(os.path.join(directory, "metadata-00000.json")).read())
  assert metadata["objective"] == "none" and metadata["counts"]["documents_across_rows"] > 10
  rows = read_all(os.path.join(directory, "train-*.tfrecord"))
  tokenizer = tokenization.load_wordpiece(default_corpus.default_vocab_path())
  special = tokenizer.special_ids
  documents = text_corpus.read_documents(text_files)
  corpus = tokenized_corpus.tokenize_documents(documents, tokenizer)
  text = {
    corpus.token_ids[
      corpus.sentence_starts[corpus.document_starts[d]] : corpus.sentence_starts[
        corpus.document_starts[d + 1]
      ]
    ].tobytes()
    for d in range(corpus.num_documents)
  }
  fill = (rows["input_mask"] > 0).mean()
  assert fill > 0.7  # Whole sentences of ~25 tokens in rows of 64 leave some padding.
  multi = np.flatnonzero(rows["input_mask"].max(axis=1) > 1)
  assert len(multi) > 5
  for row in list(multi[:100]) + list(range(100)):
    ids, doc_ids = rows["input_ids"][row], rows["input_mask"][row]
    parts = np.unique(doc_ids[doc_ids > 0])
    np.testing.assert_array_equal(parts, np.arange(1, len(parts) + 1))
    for part in parts:
      tokens = ids[doc_ids == part]
      assert tokens[-1] == special.sep and special.sep not in tokens[:-1]
      body = tokens[1:-1] if part == 1 else tokens[:-1]
      # Every part is a run of one document's tokens.
      assert any(body.astype(np.int32).tobytes() in doc for doc in text)
  # The pipeline reads them with objective none and keeps the document ids.
  data = data_for(directory, objective="none")
  batches = take(data.batches(split="train", seed=0, global_batch_size=256), 19)  # An epoch.
  assert max(b["input_mask"].max() for b in batches) > 1
  assert not any(b["next_sentence_labels"].any() for b in batches)
  with pytest.raises(ValueError, match=r"made for objective 'none' .* data.objective is 'nsp'"):
    data_for(directory)


def test_packing_cuts_long_sentences_and_counts():
  special = tokenization.SpecialTokenIds(pad=0, unk=1, cls=2, sep=3, mask=4)
  corpus = tokenized_corpus.TokenizedDocuments.from_id_lists(
    [[[10, 11, 12], [13]], [[20] * 12], [[30, 31], [32, 33]]]
  )
  arrays, counts = full_sentences.pack_full_sentences(corpus, max_seq_length=8, special_ids=special)
  np.testing.assert_array_equal(
    arrays["input_ids"],
    [
      [2, 10, 11, 12, 13, 3, 20, 3],
      [2, 20, 20, 20, 20, 20, 20, 3],
      [2, 20, 20, 20, 20, 20, 3, 0],
      [2, 30, 31, 32, 33, 3, 0, 0],
    ],
  )
  np.testing.assert_array_equal(arrays["input_mask"][0], [1, 1, 1, 1, 1, 1, 2, 2])
  assert counts == full_sentences.PackingCounts(rows=4, documents_across_rows=1, sentences_cut=1)


def test_bad_input(text_files, records_dir, tmp_path, capsys):
  empty = tmp_path / "empty.txt"
  empty.write_text("\n\n", encoding="utf-8")
  argv = [
    f"--input={empty}",
    f"--output_dir={tmp_path / 'out'}",
    f"--vocab={default_corpus.default_vocab_path()}",
  ]
  assert create_pretraining_data.main(["create_pretraining_data", *argv]) == 2
  assert "empty.txt contains no text" in capsys.readouterr().err
  assert (
    create_pretraining_data.main(
      ["create_pretraining_data", *argv[:2], f"--vocab={tmp_path / 'nope.txt'}"]
    )
    == 2
  )
  assert "nope.txt does not exist" in capsys.readouterr().err
  assert (
    create_pretraining_data.main(
      [
        "create_pretraining_data",
        f"--input={text_files[0]}",
        *argv[1:],
        "--num_shards=3",
        "--process_count=2",
      ]
    )
    == 2
  )
  assert "--num_shards=3 is not a positive multiple" in capsys.readouterr().err
  # Non-UTF-8 lines are skipped and counted in the metadata.
  mixed = tmp_path / "mixed.txt"
  mixed.write_bytes(
    open(text_files[0], "rb").read() + b"\n\n\xff\xfe bad\nGood line here.\nAnother one.\n"
  )
  directory = create([str(mixed)], tmp_path / "mixed_out")
  metadata = json.loads(open(os.path.join(directory, "metadata-00000.json")).read())
  assert metadata["counts"]["non_utf8_lines"] == 1
  # Records made for another length, and a corrupt file.
  with pytest.raises(ValueError, match=r"sequences of length 64 but data.max_seq_length is 128"):
    pretraining_pipeline.PretrainingData(
      dataclasses.replace(data_for(records_dir).config, max_seq_length=128)
    )
  corrupt = tmp_path / "corrupt"
  corrupt.mkdir()
  for name in os.listdir(records_dir):
    data = open(os.path.join(records_dir, name), "rb").read()
    if name.startswith("train-00000"):
      data = data[: len(data) // 2] + b"\x00garbage" + data[len(data) // 2 :]
    (corrupt / name).write_bytes(data)
  batches = data_for(str(corrupt)).batches(split="train", seed=0, global_batch_size=64)
  with pytest.raises(
    ValueError, match=r"is corrupt or truncated \(corrupted record at \d+\); re-create"
  ):
    take(batches, 40)
  with pytest.raises(FileNotFoundError, match=r"tfrecord_pattern=.* matches no files"):
    data_for(str(tmp_path / "nothing"))
