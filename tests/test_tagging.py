"""Token classification: CoNLL reading, first-sub-word features, windows, metrics, the loss."""

import jax
import numpy as np
import pytest
from seqeval import metrics as seqeval_metrics

from bert_jax.data import default_corpus, tokenization
from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig
from bert_jax.tasks.tagging import features as conll_features
from bert_jax.tasks.tagging import metrics as tagging_metrics
from bert_jax.tasks.tagging import objective as tagging
from bert_jax.tasks.tagging import reader as conll

# The opening of CoNLL-2003's English training file, with a second document, two blank lines in
# a row and no blank line at the very end.
CONLL_TEXT = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER


-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
1996-08-22 CD I-NP O"""


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.load_wordpiece(default_corpus.default_vocab_path())


def write(tmp_path, text, name="data.txt"):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_reader_splits_sentences_and_picks_the_label_column(tmp_path):
  path = write(tmp_path, CONLL_TEXT)
  words = [
    ("EU", "rejects", "German", "call", "."),
    ("Peter", "Blackburn"),
    ("BRUSSELS", "1996-08-22"),
  ]
  expected = {
    -1: [("B-ORG", "O", "B-MISC", "O", "O"), ("B-PER", "I-PER"), ("B-LOC", "O")],
    3: [("B-ORG", "O", "B-MISC", "O", "O"), ("B-PER", "I-PER"), ("B-LOC", "O")],
    1: [("NNP", "VBZ", "JJ", "NN", "."), ("NNP", "NNP"), ("NNP", "CD")],
    -2: [("B-NP", "B-VP", "B-NP", "I-NP", "O"), ("B-NP", "I-NP"), ("B-NP", "I-NP")],
  }
  for column, labels in expected.items():
    sentences = conll.read_conll(path, label_column=column)
    assert sentences == [conll.TaggedSentence(w, tags) for w, tags in zip(words, labels)], column
  ner = conll.read_conll(path)
  assert conll.label_vocabulary(ner) == ("O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-PER")
  assert (
    conll.label_vocabulary(
      ner, ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
    )[1]
    == "B-PER"
  )
  # Two-column files (word, tag) with tabs read the same way.
  two = conll.read_conll(write(tmp_path, "a\tB-X\nb\tO\n\nc\tO\n", "two.tsv"))
  assert two == [
    conll.TaggedSentence(("a", "b"), ("B-X", "O")),
    conll.TaggedSentence(("c",), ("O",)),
  ]


@pytest.mark.parametrize(
  "text,column,message",
  [
    (
      "EU NNP B-NP B-ORG\nrejects VBZ O\n",
      -1,
      ":2: 3 columns where the file's first token line has 4",
    ),
    ("EU\n", -1, ":1: 'EU' has one column"),
    ("EU NNP B-NP B-ORG\n", 4, ":1: data.conll_label_column=4 does not name a label column"),
    ("EU NNP B-NP B-ORG\n", 0, ":1: data.conll_label_column=0 does not name a label column"),
    ("-DOCSTART- -X- -X- O\n\n", -1, "holds no sentences"),
  ],
  ids=["columns", "one_column", "column_out_of_range", "word_column", "empty"],
)
def test_malformed_conll_is_a_one_line_error(tmp_path, text, column, message):
  path = write(tmp_path, text)
  with pytest.raises(UserInputError, match=message) as info:
    conll.read_conll(path, label_column=column)
  assert str(info.value).startswith(path) or "holds no sentences" in str(info.value)
  assert "\n" not in str(info.value)


def test_missing_file_and_unknown_labels_are_clear(tmp_path):
  with pytest.raises(FileNotFoundError, match="nowhere.txt does not exist"):
    conll.read_conll(str(tmp_path / "nowhere.txt"))
  sentences = conll.read_conll(write(tmp_path, CONLL_TEXT))
  with pytest.raises(UserInputError, match=r"labels \['B-LOC', 'B-MISC'\] occur in the data"):
    conll.label_vocabulary(sentences, ("O", "B-ORG", "B-PER", "I-PER"))
  with pytest.raises(UserInputError, match="label 'B-ORG' of sentence 0 is not in"):
    conll_features.tagging_features(sentences, ("O",), _FakeTokenizer(), 16, 8)


class _FakeTokenizer:
  special_ids = tokenization.SpecialTokenIds(pad=0, unk=1, cls=2, sep=3, mask=4)

  def encode_batch(self, words):
    return [[10 + len(word)] * len(word) for word in words]


def test_label_sits_on_the_first_sub_word(tokenizer):
  sentence = conll.TaggedSentence(
    ("Kropotkin", "in", "1840", "\x00", "U.S."), ("B-PER", "O", "O", "B-MISC", "B-LOC")
  )
  labels = ("O", "B-LOC", "B-MISC", "B-PER")
  features = conll_features.tagging_features([sentence], labels, tokenizer, 16, 8)
  # k ##rop ##ot ##kin | in | 184 ##0 | [UNK] (no pieces) | u . s .  (embedded vocab ids)
  np.testing.assert_array_equal(
    features.input_ids, [[2, 47, 600, 426, 7457, 362, 3040, 214, 1, 57, 18, 55, 18, 3, 0, 0]]
  )
  np.testing.assert_array_equal(features.input_mask, [[1] * 14 + [0] * 2])
  np.testing.assert_array_equal(
    features.word_index, [[-1, 0, -1, -1, -1, 1, 2, -1, 3, 4, -1, -1, -1, -1, -1, -1]]
  )
  np.testing.assert_array_equal(
    features.label_ids, [[0, 3, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0]]
  )
  np.testing.assert_array_equal(features.label_weights, features.word_index >= 0)
  assert features.label_weights.dtype == np.float32
  # Predictions read back per word, from the first sub-words only.
  predicted = np.full((1, 16), 9)
  predicted[0, [1, 5, 6, 8, 9]] = [3, 0, 1, 2, 1]
  assert conll_features.word_predictions(features, predicted, [5]) == [[3, 0, 1, 2, 1]]


def test_windows_are_whole_words_and_overlap_by_the_stride():
  # Words of 2, 1, 3, 1, 2 pieces; windows of at most 4 pieces, starts >= 2 pieces apart.
  starts = np.array([0, 2, 3, 6, 7, 9])
  assert conll_features.windows(starts, 4, 2) == [(0, 2), (1, 3), (3, 5)]
  # A stride longer than a window gives consecutive windows that just touch.
  assert conll_features.windows(starts, 4, 100) == [(0, 2), (2, 4), (4, 5)]
  assert conll_features.windows(starts, 9, 3) == [(0, 5)]


def corpus_sentences(count, min_words):
  """Real sentences of the embedded corpus as words, tagged by a simple rule."""
  sentences = []
  with open(default_corpus.default_corpus_path(), encoding="utf-8") as f:
    for line in f:
      words = tuple(line.split())
      if len(words) >= min_words:
        labels = tuple("B-CAP" if w[0].isupper() else "O" for w in words)
        sentences.append(conll.TaggedSentence(words, labels))
        if len(sentences) == count:
          return sentences
  raise AssertionError("corpus too small")


@pytest.mark.parametrize("max_seq_length,stride", [(16, 5), (24, 22), (12, 1), (128, 64)])
def test_long_sentences_score_every_word_once_with_most_context(tokenizer, max_seq_length, stride):
  sentences = corpus_sentences(12, min_words=30)
  labels = ("O", "B-CAP")
  features = conll_features.tagging_features(sentences, labels, tokenizer, max_seq_length, stride)
  lengths = [len(s.words) for s in sentences]
  if max_seq_length < 128:
    assert len(features) > 2 * len(sentences)  # The sentences really are split.
  # Predicting each position's own word index reads back 0..n-1: each word exactly once.
  as_words = conll_features.word_predictions(features, np.maximum(features.word_index, 0), lengths)
  assert as_words == [list(range(n)) for n in lengths]
  gold = [[labels.index(label) for label in s.labels] for s in sentences]
  assert conll_features.word_predictions(features, features.label_ids, lengths) == gold
  # The features, rebuilt by brute force: each window of `windows`, the words it scores being
  # those with no other window giving more context (the earlier one on ties).
  expected = []
  for s, sentence in enumerate(sentences):
    pieces = [tokenizer.encode(w) for w in sentence.words]
    starts = np.cumsum([0] + [len(p) for p in pieces])
    spans = conll_features.windows(starts, max_seq_length - 2, stride)
    context = lambda i, a, e, st=starts: min(st[i] - st[a], st[e] - st[i + 1])
    owner = [
      max((context(i, a, e), -w) for w, (a, e) in enumerate(spans) if a <= i < e)[1]
      for i in range(len(pieces))
    ]
    for w, (a, e) in enumerate(spans):
      assert starts[e] - starts[a] <= max_seq_length - 2
      words = [i if -owner[i] == w else -1 for i in range(a, e)]
      if max(words) >= 0:
        expected.append(
          (
            s,
            [2] + [p for i in range(a, e) for p in pieces[i]] + [3],
            [-1]
            + [x for i, x in zip(range(a, e), words) for x in [x] + [-1] * (len(pieces[i]) - 1)]
            + [-1],
          )
        )
  assert len(features) == len(expected)
  for f, (s, ids, words) in enumerate(expected):
    assert features.sentence_index[f] == s
    np.testing.assert_array_equal(features.input_ids[f, : len(ids)], ids)
    np.testing.assert_array_equal(features.word_index[f, : len(ids)], words)
    assert (features.input_ids[f, len(ids) :] == 0).all()


def _f1(correct, predicted, true):
  precision, recall = correct / predicted, correct / true
  return precision, recall, 2 * precision * recall / (precision + recall)


# (true, predicted, correct entities, predicted entities, true entities), counted by hand with
# the conlleval rules.
_ENTITY_CASES = {
  "iob2": (
    [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG", "I-ORG", "O", "B-MISC"]],
    [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "I-ORG", "O", "O", "B-MISC"]],
    2,
    4,
    4,
  ),
  # IOB1: I- opens an entity; B- only splits two adjacent entities of one type.
  "iob1": (
    [["I-PER", "I-PER", "B-PER", "O", "I-LOC"]],
    [["I-PER", "I-PER", "I-PER", "O", "I-LOC"]],
    1,
    2,
    3,
  ),
  # A type switch inside a run ends one entity and starts another; B- alone is one word.
  "boundaries": (
    [["B-PER", "I-PER", "I-LOC", "O", "B-ORG", "O", "B-PER", "B-PER"]],
    [["B-PER", "I-PER", "I-PER", "O", "B-ORG", "I-ORG", "B-PER", "B-PER"]],
    2,
    4,
    5,
  ),
}


@pytest.mark.parametrize("case", sorted(_ENTITY_CASES))
def test_entity_scores_equal_seqeval_and_hand_counts(case):
  true, predicted, correct, num_predicted, num_true = _ENTITY_CASES[case]
  scores = tagging_metrics.tagging_metrics(true, predicted)
  precision, recall, f1 = _f1(correct, num_predicted, num_true)
  assert scores["precision"] == pytest.approx(precision, abs=1e-12)
  assert scores["recall"] == pytest.approx(recall, abs=1e-12)
  assert scores["f1"] == pytest.approx(f1, abs=1e-12)
  assert scores["f1"] == seqeval_metrics.f1_score(true, predicted)
  words = [(t, p) for ts, ps in zip(true, predicted) for t, p in zip(ts, ps)]
  assert scores["accuracy"] == sum(t == p for t, p in words) / len(words)


def test_pos_tags_get_accuracy_only():
  assert tagging_metrics.is_chunk_tagset(("O", "B-PER", "I-PER", "E-LOC", "S-LOC"))
  assert not tagging_metrics.is_chunk_tagset(("NN", "VBZ", "O"))
  scores = tagging_metrics.tagging_metrics([["NN", "VBZ"]], [["NN", "NN"]], entity_level=False)
  assert scores == {"accuracy": 0.5}


def test_loss_counts_only_scored_tokens_of_real_rows():
  config = ModelConfig(
    vocab_size=64,
    hidden_size=16,
    num_layers=1,
    num_heads=2,
    intermediate_size=32,
    max_position_embeddings=8,
  )
  task = tagging.TaggingTask(config, max_seq_length=8, num_labels=3)
  rng = np.random.default_rng(0)
  batch = task.example_batch(4)
  batch["input_ids"] = rng.integers(5, 64, size=(4, 8)).astype(np.int32)
  batch["label_ids"] = rng.integers(0, 3, size=(4, 8)).astype(np.int32)
  batch["label_weights"] = (rng.random((4, 8)) < 0.5).astype(np.float32)
  batch["example_weight"] = np.array([1, 1, 1, 0], np.float32)
  params, forward = jitted_model(task, batch)
  assert set(params) == {"bert", "tagger"}
  outputs, loss, sums, predicted = forward(params, batch)
  logits = np.asarray(outputs["logits"], np.float64)
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  weights = batch["label_weights"] * batch["example_weight"][:, None]
  ce = -np.take_along_axis(log_probs, batch["label_ids"][..., None], -1)[..., 0]
  np.testing.assert_allclose(float(loss), (ce * weights).sum() / weights.sum(), rtol=1e-5)
  np.testing.assert_array_equal(predicted["label_ids"], logits.argmax(-1))
  assert task.metrics_from_sums(sums)["token_accuracy"] == pytest.approx(
    ((logits.argmax(-1) == batch["label_ids"]) * weights).sum() / weights.sum()
  )
  # Whatever the padding row holds, it changes nothing.
  padded = dict(batch, label_ids=batch["label_ids"].copy(), input_ids=batch["input_ids"].copy())
  padded["label_ids"][3] = (padded["label_ids"][3] + 1) % 3
  padded["input_ids"][3] = 7
  _, loss_padded, _, _ = forward(params, padded)
  assert float(loss_padded) == float(loss) and np.isfinite(float(loss))


def jitted_model(task, batch):
  """Initial params and a jitted (outputs, loss, sums, predictions) of ``task``'s model.

  Jitted because one compile is much faster than tracing each op on its own on CPU.
  """
  model = task.model(deterministic=True)
  params = jax.jit(model.init)(jax.random.key(0), *task.model_inputs(batch))["params"]

  @jax.jit
  def forward(params, batch):
    outputs = model.apply({"params": params}, *task.model_inputs(batch))
    loss, sums = task.loss_and_sums(outputs, batch, task.denominators(batch))
    return outputs, loss, sums, task.predictions(outputs, batch)

  return params, forward
