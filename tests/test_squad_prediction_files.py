"""SQuAD prediction files: n-best lists and null odds equal a transcription of BERT's
run_squad.py ``write_predictions`` on hand-made integer logits (many ties), and v2.0's best
thresholds equal a transcription of evaluate-v2.0's ``find_best_thresh``."""

import math

import numpy as np
import pytest

from bert_jax.data import default_corpus, tokenization
from bert_jax.tasks.span_qa import features as squad_features
from bert_jax.tasks.span_qa import metrics as squad_metrics
from bert_jax.tasks.span_qa import postprocess as squad_postprocess
from bert_jax.tasks.span_qa.features import NOT_CONTEXT
from bert_jax.tasks.span_qa.reader import SquadExample

# "societies" twice: two spans can give the same text, which the n-best list keeps once.
CONTEXT = (
  "Anarchism is a political philosophy that advocates self-governed societies based on "
  "voluntary institutions. These are often described as stateless societies, although "
  "several authors have defined them more specifically as institutions based on "
  "non-hierarchical free associations."
)


@pytest.fixture(scope="module")
def squad():
  tokenizer = tokenization.load_wordpiece(default_corpus.default_vocab_path())
  examples = [
    SquadExample("q1", "Which word?", CONTEXT, (), (), is_impossible=True),
    SquadExample("q2", "What societies?", CONTEXT, ("stateless",), (CONTEXT.index("stateless"),)),
  ]
  features = squad_features.squad_features(
    examples, tokenizer, max_seq_length=32, max_query_length=8, doc_stride=8
  )
  assert len(features) == 8  # Four windows per question.
  return examples, features


def _get_best_indexes(logits, n_best_size):
  index_and_score = sorted(enumerate(logits), key=lambda x: x[1], reverse=True)
  return [index for index, _ in index_and_score[:n_best_size]]


def _compute_softmax(scores):
  max_score = max(scores)
  exp_scores = [math.exp(score - max_score) for score in scores]
  return [x / sum(exp_scores) for x in exp_scores]


def _run_squad_write_predictions(
  example,
  features,
  rows,
  start_logits,
  end_logits,
  n_best_size,
  max_answer_length,
  version_2,
  threshold,
):
  """run_squad.py's per-example loop, transcribed; texts cut by character offsets (this
  repository's final-text rule), and the two documented deviations when nothing is valid."""
  prelim = []
  score_null, min_null_row, null_start, null_end = 1000000, 0, 0, 0
  for row in rows:
    start_indexes = _get_best_indexes(start_logits[row], n_best_size)
    end_indexes = _get_best_indexes(end_logits[row], n_best_size)
    if version_2:
      feature_null_score = start_logits[row][0] + end_logits[row][0]
      if feature_null_score < score_null:
        score_null, min_null_row = feature_null_score, row
        null_start, null_end = start_logits[row][0], end_logits[row][0]
    in_context = features.token_offsets[row, :, 0] != NOT_CONTEXT
    for start_index in start_indexes:
      for end_index in end_indexes:
        if not in_context[start_index] or not in_context[end_index]:
          continue
        if not features.max_context[row, start_index]:
          continue
        if end_index < start_index or end_index - start_index + 1 > max_answer_length:
          continue
        prelim.append(
          (row, start_index, end_index, start_logits[row][start_index], end_logits[row][end_index])
        )
  if version_2:
    prelim.append((min_null_row, 0, 0, null_start, null_end))
  prelim = sorted(prelim, key=lambda x: x[3] + x[4], reverse=True)
  seen, nbest = {}, []
  for row, start_index, end_index, start_logit, end_logit in prelim:
    if len(nbest) >= n_best_size:
      break
    if start_index > 0:
      final_text = example.context[
        features.token_offsets[row, start_index, 0] : features.token_offsets[row, end_index, 1]
      ]
      if final_text in seen:
        continue
      seen[final_text] = True
    else:
      final_text = ""
      seen[final_text] = True
    nbest.append((final_text, start_logit, end_logit))
  if version_2 and "" not in seen:
    nbest.append(("", null_start, null_end))
  if not nbest:
    nbest.append(("", 0.0, 0.0))  # run_squad.py: "empty".
  probs = _compute_softmax([s + e for _, s, e in nbest])
  nbest_json = [
    {"text": t, "probability": p, "start_logit": s, "end_logit": e}
    for (t, s, e), p in zip(nbest, probs, strict=True)
  ]
  if not version_2:
    return nbest_json[0]["text"], nbest_json, None
  # run_squad.py's best_non_null_entry: the first non-null n-best entry, i.e. the best span.
  best = next((entry for entry in prelim if entry[1] > 0), None)
  if best is None:
    return "", nbest_json, math.inf
  score_diff = score_null - best[3] - best[4]
  best_text = example.context[
    features.token_offsets[best[0], best[1], 0] : features.token_offsets[best[0], best[2], 1]
  ]
  return ("" if score_diff > threshold else best_text), nbest_json, score_diff


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
  "n_best_size,max_answer_length,version_2,threshold",
  [
    (20, 30, False, 0.0),
    (20, 30, True, 0.0),
    (3, 4, True, 0.0),
    (5, 3, True, -2.0),
    (2, 30, False, 0.0),
    (1, 30, True, 1.0),
  ],
)
def test_nbest_and_null_odds_equal_run_squad(
  squad, seed, n_best_size, max_answer_length, version_2, threshold
):
  examples, features = squad
  rng = np.random.default_rng(seed)
  # Integers in a small range: ties between spans, windows and the null answer everywhere.
  start_logits = rng.integers(-3, 4, features.input_ids.shape).astype(np.float64)
  end_logits = rng.integers(-3, 4, features.input_ids.shape).astype(np.float64)
  options = squad_postprocess.AnswerOptions(n_best_size, max_answer_length, version_2, threshold)
  results = squad_postprocess.predict(examples, features, start_logits, end_logits, options)
  assert list(results) == ["q1", "q2"]
  for e, example in enumerate(examples):
    rows = list(np.flatnonzero(features.example_index == e))
    answer, nbest, null_odds = _run_squad_write_predictions(
      example,
      features,
      rows,
      start_logits,
      end_logits,
      n_best_size,
      max_answer_length,
      version_2,
      threshold,
    )
    got = results[example.qid]
    assert got.answer == answer
    assert [(n["text"], n["start_logit"], n["end_logit"]) for n in got.nbest] == [
      (n["text"], n["start_logit"], n["end_logit"]) for n in nbest
    ]
    np.testing.assert_allclose(
      [n["probability"] for n in got.nbest], [n["probability"] for n in nbest], rtol=1e-12
    )
    assert got.null_odds == null_odds
  assert squad_postprocess.predict_answers(
    examples, features, start_logits, end_logits, options
  ) == {q: r.answer for q, r in results.items()}


def test_nbest_by_hand(squad):
  """Duplicate texts are kept once; the null answer follows spans of its own score."""
  examples, features = squad
  start_logits = np.full(features.input_ids.shape, -9.0)
  end_logits = np.full(features.input_ids.shape, -9.0)
  positions = {}
  for word_start, word in (
    (CONTEXT.index("self-governed societies") + 14, "societies"),
    (CONTEXT.index("stateless societies") + 10, "societies"),
    (CONTEXT.index("stateless"), "stateless"),
  ):
    rows = [
      f
      for f in range(4)
      if np.any((features.token_offsets[f, :, 0] == word_start) & features.max_context[f])
    ]
    (row,) = rows
    first = int(np.flatnonzero(features.token_offsets[row, :, 0] == word_start)[0])
    last = int(np.flatnonzero(features.token_offsets[row, :, 1] == word_start + len(word))[0])
    positions[word_start] = (row, first, last)
  (r1, s1, e1), (r2, s2, e2), (r3, s3, e3) = positions.values()
  assert len({r1, r2, r3}) == 3  # Three windows, in the order of the words.
  start_logits[r1, s1], end_logits[r1, e1] = 2.0, 2.0  # "societies": 4
  start_logits[r2, s2], end_logits[r2, e2] = 3.0, 3.0  # "societies" again: 6, listed once
  start_logits[r3, s3], end_logits[r3, e3] = 1.0, 3.0  # "stateless": 4
  start_logits[:4, 0], end_logits[:4, 0] = 2.0, 2.0  # null: 4, after the spans of score 4
  for n_best_size in (3, 2):  # With 2 places the null answer is added after them.
    options = squad_postprocess.AnswerOptions(n_best_size=n_best_size, version_2_with_negative=True)
    got = squad_postprocess.predict(examples[:1], features, start_logits, end_logits, options)["q1"]
    assert [(n["text"], n["start_logit"], n["end_logit"]) for n in got.nbest] == [
      ("societies", 3.0, 3.0),
      ("stateless", 1.0, 3.0),
      ("", 2.0, 2.0),
    ]
    total = math.exp(6.0) + 2 * math.exp(4.0)
    np.testing.assert_allclose(
      [n["probability"] for n in got.nbest], [math.exp(6.0) / total] + 2 * [math.exp(4.0) / total]
    )
    assert got.null_odds == 4.0 - 6.0 and got.answer == "societies"


def _find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
  """evaluate-v2.0.py's find_best_thresh, verbatim but for names."""
  num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
  cur_score = num_no_ans
  best_score = cur_score
  best_thresh = 0.0
  qid_list = sorted(na_probs, key=lambda k: na_probs[k])
  for qid in qid_list:
    if qid not in scores:
      continue
    if qid_to_has_ans[qid]:
      diff = scores[qid]
    elif preds[qid]:
      diff = -1
    else:
      diff = 0
    cur_score += diff
    if cur_score > best_score:
      best_score = cur_score
      best_thresh = na_probs[qid]
  return 100.0 * best_score / len(scores), best_thresh


def _official(gold, preds, null_odds):
  exact, f1, has_ans = squad_metrics.question_scores(gold, preds)
  best_exact, exact_thresh = _find_best_thresh(preds, exact, null_odds, has_ans)
  best_f1, f1_thresh = _find_best_thresh(preds, f1, null_odds, has_ans)
  return {
    "best_exact": best_exact,
    "best_exact_thresh": exact_thresh,
    "best_f1": best_f1,
    "best_f1_thresh": f1_thresh,
  }


def test_best_thresholds_by_hand_with_ties():
  gold = {"b": [], "a": ["x"], "c": ["y"], "d": [], "e": ["z w v"]}
  preds = {"b": "foo", "a": "x", "c": "", "d": "", "e": "z w"}
  # b and a tie: the sweep takes b (file order) first, so a's +1 only restores the start.
  null_odds = {"b": -1.0, "a": -1.0, "c": 0.5, "d": 0.5, "e": 2.0}
  got = squad_metrics.best_thresholds(gold, preds, null_odds)
  assert got == pytest.approx(
    {"best_exact": 40.0, "best_exact_thresh": 0.0, "best_f1": 56.0, "best_f1_thresh": 2.0}
  )  # e: F1 0.8.
  assert got == _official(gold, preds, null_odds)
  # With a first among the tied, answering a and b (threshold -1) is best for EM.
  swapped = {"a": -1.0, **null_odds}
  assert squad_metrics.best_thresholds(gold, preds, swapped)["best_exact_thresh"] == -1.0
  assert squad_metrics.best_thresholds(gold, preds, swapped) == _official(gold, preds, swapped)


@pytest.mark.parametrize("seed", range(5))
def test_best_thresholds_equal_the_official_script(seed):
  rng = np.random.default_rng(seed)
  words = ["red", "blue", "the", "cat", "dog", ""]
  gold, preds, null_odds = {}, {}, {}
  for i in rng.permutation(40):
    qid = f"q{i}"
    gold[qid] = [] if rng.random() < 0.4 else [" ".join(rng.choice(words[:5], 2))]
    preds[qid] = " ".join(w for w in rng.choice(words, 2) if w)
    null_odds[qid] = float(rng.integers(-3, 4))  # Many ties.
  assert squad_metrics.best_thresholds(gold, preds, null_odds) == _official(gold, preds, null_odds)
