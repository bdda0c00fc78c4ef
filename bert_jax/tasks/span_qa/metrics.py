"""SQuAD's official exact match and F1 (v1.1 and v2.0 evaluation scripts), in percent.

Answers are compared after normalisation: lowercase, ASCII punctuation removed, the articles
"a", "an", "the" removed as words, whitespace collapsed. A prediction scores the maximum over
the question's gold answers. F1 is over the multiset of normalised words.

The rules are the v2.0 script's, which scores v1.1 data exactly as the v1.1 script does except
for gold answers that normalise to nothing (such as "the"): v2.0 drops them, so a question
whose gold answers all normalise to nothing is scored as unanswerable. An unanswerable question
(no gold answers) is answered correctly only by the empty prediction. With unanswerable
questions present the breakdown over answerable ("HasAns_*") and unanswerable ("NoAns_*")
questions is added. Equality with ``transformers.data.metrics.squad_metrics`` is tested.

`best_thresholds` is the v2.0 script's ``find_best_thresh``: the no-answer threshold on the
null odds that maximises EM (F1) on the dev set, and that best score.
"""

import collections
import re
import string

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text):
  """Lowercase, drop punctuation and articles, collapse whitespace (the official rule)."""
  text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
  return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction, gold):
  """1 if the normalised texts are equal, else 0."""
  return int(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction, gold):
  """Word-overlap F1 of the normalised texts; 1 if both are empty, 0 if only one is."""
  prediction_words = normalize_answer(prediction).split()
  gold_words = normalize_answer(gold).split()
  if not prediction_words or not gold_words:
    return float(prediction_words == gold_words)
  common = sum((collections.Counter(prediction_words) & collections.Counter(gold_words)).values())
  if not common:
    return 0.0
  precision = common / len(prediction_words)
  recall = common / len(gold_words)
  return 2 * precision * recall / (precision + recall)


def question_scores(gold_answers, predictions):
  """Per question: exact match (0/1), F1 (0..1) and whether it is answerable.

  Args:
    gold_answers: {question id: list of gold answer texts}; empty for unanswerable questions.
    predictions: {question id: predicted text} for every question of ``gold_answers``.

  Returns:
    ({qid: exact}, {qid: f1}, {qid: answerable}) in the order of ``gold_answers``.

  Raises:
    ValueError: a question has no prediction.
  """
  missing = sorted(set(gold_answers) - set(predictions))
  if missing:
    raise ValueError(f"{len(missing)} questions have no prediction, e.g. {missing[:3]}")
  exact, f1, answerable = {}, {}, {}
  for qid, golds in gold_answers.items():
    answerable[qid] = bool(golds)  # The breakdown follows the file, as the script's does.
    golds = [g for g in golds if normalize_answer(g)] or [""]
    exact[qid] = max(exact_match(predictions[qid], g) for g in golds)
    f1[qid] = max(f1_score(predictions[qid], g) for g in golds)
  return exact, f1, answerable


def _best_threshold(predictions, scores, null_odds, answerable):
  """The v2.0 script's find_best_thresh: (best score in percent, its threshold)."""
  current = best = sum(1 for qid in scores if not answerable[qid])
  threshold = 0.0
  for qid in sorted(null_odds, key=lambda q: null_odds[q]):  # Stable: file order on ties.
    if qid not in scores:
      continue
    if answerable[qid]:
      current += scores[qid]
    elif predictions[qid]:
      current -= 1
    if current > best:
      best, threshold = current, null_odds[qid]
  return 100.0 * best / len(scores), threshold


def best_thresholds(gold_answers, predictions, null_odds):
  """SQuAD v2.0's best no-answer thresholds on the null odds (evaluate-v2.0's logic).

  Sweeping the questions by rising null odds, each threshold answers the questions up to it
  and abstains on the rest; the best EM / F1 of the sweep (starting from abstaining on all, at
  threshold 0.0) and the null odds that first reach it are reported.

  Args:
    gold_answers: {question id: gold texts}; empty for unanswerable questions.
    predictions: {question id: predicted text} (the answers of the run's threshold).
    null_odds: {question id: null score - best span score}.

  Returns:
    {"best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"} (scores in percent).
  """
  exact, f1, answerable = question_scores(gold_answers, predictions)
  best_exact, exact_threshold = _best_threshold(predictions, exact, null_odds, answerable)
  best_f1, f1_threshold = _best_threshold(predictions, f1, null_odds, answerable)
  return {
    "best_exact": best_exact,
    "best_exact_thresh": exact_threshold,
    "best_f1": best_f1,
    "best_f1_thresh": f1_threshold,
  }


def squad_scores(gold_answers, predictions):
  """Exact match and F1 over a set of questions, in percent.

  Args:
    gold_answers: {question id: list of gold answer texts}; empty for unanswerable questions.
    predictions: {question id: predicted text} for every question of ``gold_answers``.

  Returns:
    {"exact": ..., "f1": ...}, plus "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"
    when some question is unanswerable (each over its own questions).

  Raises:
    ValueError: a question has no prediction.
  """
  exact, f1, answerable = question_scores(gold_answers, predictions)

  def mean(scores, qids):
    return 100.0 * sum(scores[q] for q in qids) / len(qids)

  qids = list(gold_answers)
  result = {"exact": mean(exact, qids), "f1": mean(f1, qids)}
  no_answer = [q for q in qids if not answerable[q]]
  if no_answer:
    has_answer = [q for q in qids if answerable[q]]
    for name, subset in (("HasAns", has_answer), ("NoAns", no_answer)):
      if subset:
        result[f"{name}_exact"] = mean(exact, subset)
        result[f"{name}_f1"] = mean(f1, subset)
  return result
