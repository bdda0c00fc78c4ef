"""SQuAD post-processing on hand-made logits: max context over windows, invalid spans, null answer.

One context is cut into windows of 26 context tokens every 8 tokens (max_seq_length 32); the
logits are set by hand at chosen words of chosen windows.
"""

import numpy as np
import pytest

from bert_jax.data import default_corpus, tokenization
from bert_jax.tasks.span_qa import features as squad_features
from bert_jax.tasks.span_qa import postprocess as squad_postprocess
from bert_jax.tasks.span_qa.reader import SquadExample

CONTEXT = (
  "Anarchism is a political philosophy that advocates self-governed societies based on "
  "voluntary institutions. These are often described as stateless societies, although "
  "several authors have defined them more specifically as institutions based on "
  "non-hierarchical free associations."
)
V1 = squad_postprocess.AnswerOptions(n_best_size=20, max_answer_length=30)


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.load_wordpiece(default_corpus.default_vocab_path())


def _example(answer=None):
  if answer is None:
    return SquadExample("q", "Which word?", CONTEXT, (), (), is_impossible=True)
  return SquadExample("q", "Which word?", CONTEXT, (answer,), (CONTEXT.index(answer),))


def _features(tokenizer, example):
  return squad_features.squad_features(
    [example], tokenizer, max_seq_length=32, max_query_length=8, doc_stride=8
  )


def _first_token(features, f, word):
  """Row position in feature ``f`` of the first token of ``word`` (None if not there)."""
  hits = np.flatnonzero(features.token_offsets[f, :, 0] == CONTEXT.index(word))
  return int(hits[0]) if len(hits) else None


def _last_token(features, f, word):
  hits = np.flatnonzero(features.token_offsets[f, :, 1] == CONTEXT.index(word) + len(word))
  return int(hits[0]) if len(hits) else None


def _windows_holding(features, word):
  return [f for f in range(len(features)) if _first_token(features, f, word) is not None]


def _logits(features, spans):
  """Start / end logits: -5, except ``{(feature, start pos, end pos): (start, end logit)}``."""
  start, end = np.full(features.input_ids.shape, -5.0), np.full(features.input_ids.shape, -5.0)
  for (f, s, e), (start_logit, end_logit) in spans.items():
    start[f, s] = start_logit
    end[f, e] = end_logit
  return start, end


def _span(features, f, first_word, last_word=None):
  return f, _first_token(features, f, first_word), _last_token(features, f, last_word or first_word)


def test_an_answer_seen_in_several_windows_counts_only_where_it_has_max_context(tokenizer):
  example = _example("stateless")
  features = _features(tokenizer, example)
  holding = _windows_holding(features, "stateless")
  assert holding == [0, 1, 2]
  start = [_first_token(features, f, "stateless") for f in holding]
  assert [bool(features.max_context[f, s]) for f, s in zip(holding, start)] == [False, True, False]
  # High scores for "stateless" in windows 0 and 2 lose to a weaker span in window 1, because
  # only window 1 gives its start token the most context.
  spans = {
    _span(features, 0, "stateless"): (10.0, 10.0),
    _span(features, 2, "stateless"): (10.0, 10.0),
    _span(features, 1, "described"): (4.0, 4.0),
  }
  assert squad_postprocess.predict_answers([example], features, *_logits(features, spans), V1) == {
    "q": "described"
  }
  spans[_span(features, 1, "stateless")] = (5.0, 5.0)
  assert squad_postprocess.predict_answers([example], features, *_logits(features, spans), V1) == {
    "q": "stateless"
  }


def test_an_answer_crossing_a_window_edge_is_labelled_and_found_in_the_windows_holding_it(
  tokenizer,
):
  answer = "These are often described as stateless societies, although"
  example = _example(answer)
  features = _features(tokenizer, example)
  # Window 0 ends inside the answer; windows 1 and 2 hold it whole; window 3 starts after it.
  assert _first_token(features, 0, "These") and _last_token(features, 0, "although") is None
  assert _first_token(features, 3, "These") is None
  labels = [_span(features, f, "These", "although")[1:] for f in (1, 2)]
  np.testing.assert_array_equal(features.start_positions, [0, labels[0][0], labels[1][0], 0])
  np.testing.assert_array_equal(features.end_positions, [0, labels[0][1], labels[1][1], 0])
  assert [bool(features.max_context[f, labels[f - 1][0]]) for f in (1, 2)] == [True, False]
  # A trained model's view: every window points at the part of the answer it holds. Window
  # 0's best end is its final [SEP], outside the context, so it cannot win; nor can window 2,
  # where the start lacks max context.
  spans = {
    (1, *labels[0]): (5.0, 5.0),
    (2, *labels[1]): (7.0, 7.0),
    (0, _first_token(features, 0, "These"), 31): (8.0, 8.0),
  }
  answers = squad_postprocess.predict_answers([example], features, *_logits(features, spans), V1)
  assert answers == {"q": answer}


def test_spans_longer_than_max_answer_length_or_ending_before_they_start_are_rejected(tokenizer):
  example = _example("stateless")
  features = _features(tokenizer, example)
  f = 1  # All of "These are often described as stateless" has its max context here.
  five_tokens = _span(features, f, "often", "stateless")  # often described as state ##less
  assert five_tokens[2] - five_tokens[1] == 4
  spans = {five_tokens: (9.0, 9.0), _span(features, f, "These"): (6.0, 6.0)}
  start, end = _logits(features, spans)
  for max_length, expected in ((5, "often described as stateless"), (4, "These")):
    options = squad_postprocess.AnswerOptions(max_answer_length=max_length)
    assert squad_postprocess.predict_answers([example], features, start, end, options) == {
      "q": expected
    }
  # The best start comes after the best end: not a span.
  backwards = {
    (f, _first_token(features, f, "described"), _last_token(features, f, "These")): (9.0, 9.0),
    _span(features, f, "often"): (4.0, 4.0),
  }
  assert squad_postprocess.predict_answers(
    [example], features, *_logits(features, backwards), V1
  ) == {"q": "often"}
  # n_best_size 1 pairs only the top start with the top end: nothing valid is left.
  assert squad_postprocess.predict_answers(
    [example],
    features,
    *_logits(features, backwards),
    squad_postprocess.AnswerOptions(n_best_size=1),
  ) == {"q": ""}


def test_v2_null_answer_against_the_threshold(tokenizer):
  example = _example()
  features = _features(tokenizer, example)
  assert len(features) == 4 and not features.start_positions.any()
  # Null scores per window ([CLS] start + end): 4, 2, 6, 8; the example's is their minimum, 2.
  spans = {(f, 0, 0): (null / 2, null / 2) for f, null in enumerate((4.0, 2.0, 6.0, 8.0))}
  spans[_span(features, 1, "described")] = (1.0, 0.5)  # Best span: 1.5, so null - span = 0.5.
  start, end = _logits(features, spans)
  for threshold, expected in ((0.25, ""), (0.5, "described"), (0.75, "described")):
    options = squad_postprocess.AnswerOptions(
      version_2_with_negative=True, null_score_diff_threshold=threshold
    )
    answers = squad_postprocess.predict_answers([example], features, start, end, options)
    assert answers == {"q": expected}, threshold
  # SQuAD 1.1 always answers; [CLS] is never a span.
  assert squad_postprocess.predict_answers([example], features, start, end, V1) == {
    "q": "described"
  }


def test_logits_that_do_not_match_the_features_are_refused(tokenizer):
  example = _example("stateless")
  features = _features(tokenizer, example)
  with pytest.raises(ValueError, match=r"logits of shapes \(3, 32\)"):
    squad_postprocess.predict_answers([example], features, np.zeros((3, 32)), np.zeros((3, 32)))
