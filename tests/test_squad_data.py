"""SQuAD reading and features: JSON v1.1 / v2.0, malformed files, doc-stride windows, labels."""

import itertools
import json
import unicodedata

import numpy as np
import pytest

from bert_jax.data import default_corpus, tokenization
from bert_jax.errors import UserInputError
from bert_jax.tasks.finetune_config import FinetuneDataConfig
from bert_jax.tasks.span_qa import data as squad_data
from bert_jax.tasks.span_qa import features as squad_features
from bert_jax.tasks.span_qa import reader as squad_reader
from tests.test_squad_finetune import squad_json, write_squad_files

CONTEXT = "The first known use of this word was in 1539. It spread to France."


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.load_wordpiece(default_corpus.default_vocab_path())


def _write(tmp_path, content, name="squad.json"):
  path = tmp_path / name
  path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
  return str(path)


def test_token_offsets_give_each_token_its_source_characters(tokenizer):
  text = "Héllo  Wörld, naïve café — 1539. Erich Mühsam's \u200bthe end"
  ids, offsets = tokenizer.encode_batch_with_offsets([text])[0]
  assert ids.tolist() == tokenizer.encode(text) and offsets.shape == (len(ids), 2)
  unaccented = lambda s: "".join(  # pylint: disable=unnecessary-lambda-assignment
    c for c in unicodedata.normalize("NFD", s.lower()) if not unicodedata.combining(c)
  )
  pieces = tokenizer.convert_ids_to_tokens(ids)
  assert [unaccented(text[start:end]) for start, end in offsets] == [
    p.removeprefix("##") for p in pieces
  ]
  assert pieces[:3] == ["hell", "##o", "world"] and offsets[:3].tolist() == [
    [0, 4],
    [4, 5],
    [7, 12],
  ]


def _file(qas, context=CONTEXT):
  return {
    "version": "v2.0",
    "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}],
  }


def test_reads_v1_and_v2_entries(tmp_path):
  qas = [
    {
      "id": "a",
      "question": "When?",
      "answers": [{"text": "1539", "answer_start": 40}, {"text": "in 1539", "answer_start": 37}],
    },
    {
      "id": "b",
      "question": "Where?",
      "is_impossible": True,
      "answers": [],
      "plausible_answers": [{"text": "France", "answer_start": 59}],
    },
  ]
  examples = squad_reader.read_squad_json(_write(tmp_path, _file(qas)))
  assert examples == [
    squad_reader.SquadExample("a", "When?", CONTEXT, ("1539", "in 1539"), (40, 37), False),
    squad_reader.SquadExample("b", "Where?", CONTEXT, (), (), True),
  ]


@pytest.mark.parametrize(
  "content,message",
  [
    ("{not json", "is not UTF-8 JSON"),
    ({"version": "1.1"}, "the top level lacks the 'data' field"),
    ({"data": [{"title": "t"}]}, "data[0] lacks the 'paragraphs' field"),
    ({"data": [{"paragraphs": [{"qas": []}]}]}, "data[0].paragraphs[0] lacks the 'context'"),
    (
      {"data": [{"paragraphs": [{"context": CONTEXT}]}]},
      "data[0].paragraphs[0] lacks the 'qas' field",
    ),
    (
      _file([{"id": "q7", "question": "When?", "answers": [{"text": "1539", "answer_start": 41}]}]),
      (
        "data[0].paragraphs[0].qas[0] (id 'q7'): answer_start 41 selects '539.' from the context "
        "but the answer text is '1539'"
      ),
    ),
    (
      _file([{"id": "q7", "question": "When?", "answers": [{"text": "1539"}]}]),
      "qas[0] (id 'q7').answers[0] needs 'text' and 'answer_start'",
    ),
    (
      _file([{"id": "q7", "answers": [{"text": "1539", "answer_start": 40}]}]),
      "qas[0] (id 'q7') lacks the 'question' field",
    ),
    (
      _file([{"id": "q7", "question": "When?", "answers": []}]),
      "(id 'q7'): the question has no answers and is not marked is_impossible",
    ),
    (
      _file(
        [
          {
            "id": "q7",
            "question": "When?",
            "is_impossible": True,
            "answers": [{"text": "1539", "answer_start": 40}],
          }
        ]
      ),
      "(id 'q7'): is_impossible is true but the question has answers",
    ),
    (
      _file(
        [
          {"id": "q7", "question": "When?", "answers": [{"text": "1539", "answer_start": 40}]},
          {"id": "q7", "question": "Why?", "answers": [{"text": "1539", "answer_start": 40}]},
        ]
      ),
      "qas[1] (id 'q7'): the id is used twice",
    ),
    ({"data": []}, "holds no questions"),
  ],
  ids=[
    "not_json",
    "no_data",
    "no_paragraphs",
    "no_context",
    "no_qas",
    "answer_start",
    "answer_fields",
    "no_question",
    "no_answers",
    "impossible_with_answers",
    "duplicate_id",
    "empty",
  ],
)
def test_malformed_squad_json_is_a_one_line_error_naming_file_and_entry(tmp_path, content, message):
  path = _write(tmp_path, content)
  with pytest.raises(UserInputError) as error:
    squad_reader.read_squad_json(path)
  text = str(error.value)
  assert text.startswith(path) or f"SQuAD file {path}" in text, text
  assert message in text and "\n" not in text, text


def test_missing_file_and_v2_data_in_a_v1_run_are_clear_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="SQuAD file /nonexistent.json does not exist"):
    squad_reader.read_squad_json("/nonexistent.json")
  path = _write(tmp_path, squad_json(2, seed=0, version_2=True))
  config = FinetuneDataConfig(train_path=path, eval_path=path)
  with pytest.raises(
    UserInputError,
    match=r"unanswerable questions \(e.g. id 's0n\d+'\).*"
    r"configs/finetune/squad.py:v2",
  ):
    squad_data.read_split(config, "train")


def _prepare_tfds_squad(monkeypatch, name, train, dev, data_dir):
  """Builds TFDS ``name`` from local files, as `tfds build` would from the downloaded ones."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  monkeypatch.setattr(
    tfds.download.DownloadManager,
    "download_and_extract",
    lambda self, urls: {"train": train, "dev": dev},
  )
  # Only the files above: no prepared copy from Google Cloud Storage.
  download_config = tfds.download.DownloadConfig(try_download_gcs=False)
  tfds.builder(name, data_dir=data_dir).download_and_prepare(download_config=download_config)


@pytest.mark.parametrize("name", ["squad/v1.1", "squad/v2.0"])
def test_tfds_squad_reads_as_the_json_it_was_prepared_from(tmp_path, monkeypatch, name):
  version_2 = name.endswith("v2.0")
  train, dev = write_squad_files(tmp_path, version_2=version_2, num_train=6, num_eval=4)
  data_dir = str(tmp_path / "tfds")
  with pytest.raises(UserInputError, match=f"`tfds build {name} --data_dir={data_dir}`"):
    squad_reader.read_squad_tfds(name, split="train", data_dir=data_dir)
  _prepare_tfds_squad(monkeypatch, name, train, dev, data_dir)
  config = FinetuneDataConfig(
    tfds_name=name, tfds_data_dir=data_dir, version_2_with_negative=version_2
  )
  by_id = lambda examples: sorted(examples, key=lambda e: e.qid)  # pylint: disable=unnecessary-lambda-assignment
  for split, path in (("train", train), ("eval", dev)):
    expected = squad_reader.read_squad_json(path)
    assert by_id(squad_data.read_split(config, split)) == by_id(expected)
    assert any(e.is_impossible for e in expected) == version_2


def test_tfds_squad_with_a_misaligned_answer_names_the_example(tmp_path, monkeypatch):
  content = _file(
    [{"id": "q7", "question": "When?", "answers": [{"text": "1539", "answer_start": 39}]}]
  )
  path = _write(tmp_path, content)
  _prepare_tfds_squad(monkeypatch, "squad/v1.1", path, path, str(tmp_path / "tfds"))
  with pytest.raises(
    UserInputError,
    match=r"^TFDS squad/v1.1\[validation\] example 0 \(id 'q7'\)"
    r": answer_start 39 selects ' 153' from the context",
  ):
    squad_reader.read_squad_tfds("squad/v1.1", split="validation", data_dir=str(tmp_path / "tfds"))


def _reference_max_context(windows, token):
  """The original BERT's rule, written as its loop: the best window of a context token."""
  best, best_score = None, None
  for w, (start, length) in enumerate(windows):
    if not start <= token < start + length:
      continue
    score = min(token - start, start + length - 1 - token) + 0.01 * length
    if best_score is None or score > best_score:
      best, best_score = w, score
  return best


# (32, 64): a stride longer than a window gives windows that touch, skipping nothing.
@pytest.mark.parametrize("max_seq_length,doc_stride", [(48, 12), (64, 24), (32, 64)])
def test_windows_cover_the_context_and_labels_give_back_the_answer(
  tmp_path, tokenizer, max_seq_length, doc_stride
):
  examples = squad_reader.read_squad_json(_write(tmp_path, squad_json(16, seed=3, version_2=True)))
  max_query_length = 6
  features = squad_features.squad_features(
    examples,
    tokenizer,
    max_seq_length=max_seq_length,
    max_query_length=max_query_length,
    doc_stride=doc_stride,
  )
  special = tokenizer.special_ids
  multi_window = 0
  for e, example in enumerate(examples):
    rows = np.flatnonzero(features.example_index == e)
    context_ids, context_offsets = tokenizer.encode_batch_with_offsets([example.context])[0]
    question = tokenizer.encode(example.question)[:max_query_length]
    prefix = [special.cls, *question, special.sep]
    room = max_seq_length - len(prefix) - 1
    windows = []
    for f in rows:
      length = int(features.input_mask[f].sum()) - len(prefix) - 1
      in_context = features.token_offsets[f, :, 0] >= 0
      np.testing.assert_array_equal(np.flatnonzero(in_context), len(prefix) + np.arange(length))
      # The window is a slice of the context's tokens, with their character offsets.
      start = int(np.searchsorted(context_offsets[:, 0], features.token_offsets[f, len(prefix), 0]))
      windows.append((start, length))
      np.testing.assert_array_equal(
        features.input_ids[f, : len(prefix) + length + 1],
        prefix + context_ids[start : start + length].tolist() + [special.sep],
      )
      np.testing.assert_array_equal(
        features.token_offsets[f, in_context], context_offsets[start : start + length]
      )
      np.testing.assert_array_equal(
        features.token_type_ids[f],
        (np.arange(max_seq_length) >= len(prefix)) & (features.input_mask[f] == 1),
      )
    assert windows[0][0] == 0
    for (start, length), (next_start, _) in itertools.pairwise(windows):
      assert length == room and next_start == start + min(doc_stride, room)
    assert windows[-1][0] + windows[-1][1] == len(context_ids)
    multi_window += len(windows) > 1
    # Every context token has its max context in exactly the window the original rule picks.
    for token in range(len(context_ids)):
      flags = [
        features.max_context[f, len(prefix) + token - s] if s <= token < s + n else False
        for f, (s, n) in zip(rows, windows)
      ]
      assert flags.index(True) == _reference_max_context(windows, token) and sum(flags) == 1
    # Labels: the exact answer text wherever the answer lies wholly in the window, else [CLS].
    labelled = 0
    for f, (s, n) in zip(rows, windows):
      first, last = features.start_positions[f], features.end_positions[f]
      if example.is_impossible:
        assert first == last == 0
        continue
      answer_start = example.answer_starts[0]
      answer_end = answer_start + len(example.answer_texts[0])
      inside = context_offsets[s, 0] <= answer_start and answer_end <= context_offsets[s + n - 1, 1]
      if inside:
        labelled += 1
        assert (
          example.context[features.token_offsets[f, first, 0] : features.token_offsets[f, last, 1]]
          == example.answer_texts[0]
        )
      else:
        assert first == last == 0
    # Overlapping windows hold every short answer whole in at least one of them.
    assert example.is_impossible or labelled >= 1 or doc_stride > room // 2
  assert multi_window >= 5, multi_window


@pytest.mark.parametrize(
  "lengths,message",
  [
    ({"max_seq_length": 32, "max_query_length": 29, "doc_stride": 8}, "leaves no room for context"),
    ({"max_seq_length": 32, "max_query_length": 8, "doc_stride": 0}, "must be at least 1"),
  ],
)
def test_lengths_that_leave_no_window_are_refused(tokenizer, lengths, message):
  with pytest.raises(UserInputError, match=message):
    squad_features.squad_features([], tokenizer, **lengths)
