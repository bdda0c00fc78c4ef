"""Span-QA logits -> answer texts (host side, numpy), as the original BERT's SQuAD predictions.

For each feature the ``n_best_size`` highest start and end logits are paired; a pair is a
candidate when both ends lie in the context, the start token has its max context in this window
(see `features.squad_features`), the end is not before the start and the span has at most
``max_answer_length`` tokens. An example's answer is its best candidate (start + end logit) over
all its windows, cut from the original context through the tokens' character offsets.

SQuAD 2.0: the null score of a window is its [CLS] start + end logit, the example's null score
the smallest over its windows; the answer is empty when
``null score - best candidate score > null_score_diff_threshold`` (or when no candidate exists).

`predict` also gives what BERT's run_squad.py writes: the n-best list (candidates of all windows
by score, the first of each distinct text, at most ``n_best_size``; v2.0 adds the null answer
"" where its score ranks it, or at the end; softmax probabilities over the list's scores) and,
for v2.0, the null odds (null score - best candidate score). One deviation: a question without
any candidate gets the n-best ``[{"text": ""}]`` (run_squad.py: "empty") so the n-best list
agrees with the answer, and null odds ``inf``.
"""

import dataclasses

import numpy as np

from bert_jax.tasks.span_qa.features import NOT_CONTEXT


@dataclasses.dataclass(frozen=True)
class AnswerOptions:
  """Post-processing settings (BERT: n_best 20, max answer 30 tokens, threshold 0)."""

  n_best_size: int = 20
  max_answer_length: int = 30
  version_2_with_negative: bool = False
  null_score_diff_threshold: float = 0.0


def _candidates(features, start_logits_FL, end_logits_FL, options):
  """Every feature's (start rank, end rank) pairs: score (-inf if invalid), start, end [F, P]."""
  num_features, length = start_logits_FL.shape
  k = min(options.n_best_size, length)
  # Stable sorts keep the lower position first among equal logits, as the original does.
  starts_FK = np.argsort(-start_logits_FL, axis=1, kind="stable")[:, :k]
  ends_FK = np.argsort(-end_logits_FL, axis=1, kind="stable")[:, :k]
  rows_F1 = np.arange(num_features)[:, None]
  in_context_FL = features.token_offsets[:, :, 0] != NOT_CONTEXT
  start_ok_FK = (in_context_FL & features.max_context)[rows_F1, starts_FK]
  end_ok_FK = in_context_FL[rows_F1, ends_FK]
  span_FKK = ends_FK[:, None, :] - starts_FK[:, :, None]
  valid_FKK = (
    start_ok_FK[:, :, None]
    & end_ok_FK[:, None, :]
    & (span_FKK >= 0)
    & (span_FKK < options.max_answer_length)
  )
  score_FKK = (
    start_logits_FL[rows_F1, starts_FK][:, :, None] + end_logits_FL[rows_F1, ends_FK][:, None, :]
  )
  score_FP = np.where(valid_FKK, score_FKK, -np.inf).reshape(num_features, k * k)
  return score_FP, np.repeat(starts_FK, k, axis=1), np.tile(ends_FK, (1, k))


@dataclasses.dataclass(frozen=True)
class QuestionPrediction:
  """What run_squad.py writes for one question.

  Attributes:
    answer: the predicted text ("" for no answer).
    nbest: [{"text", "probability", "start_logit", "end_logit"}], best first.
    null_odds: v2.0: null score - best candidate score (inf without candidates); None in v1.1.
  """

  answer: str
  nbest: list
  null_odds: float | None


def _softmax(scores):
  exp = np.exp(np.asarray(scores, np.float64) - np.max(scores))
  return exp / exp.sum()


def _nbest(example, features, first, stop, logits, candidates, null, options):
  """One example's n-best entries (text, start logit, end logit), best first, and best text."""
  start_logits_FL, end_logits_FL = logits
  score_P, start_P, end_P = (c[first:stop].reshape(-1) for c in candidates)
  feature_P = np.repeat(np.arange(first, stop), candidates[0].shape[1])
  valid = np.flatnonzero(np.isfinite(score_P))
  # Stable: equal scores keep window, start rank, end rank order, as run_squad.py's sort; its
  # null entry is appended before sorting, so it follows the spans of equal score.
  order = valid[np.argsort(-score_P[valid], kind="stable")]

  def text_of(p):
    return example.context[
      features.token_offsets[feature_P[p], start_P[p], 0] : features.token_offsets[
        feature_P[p], end_P[p], 1
      ]
    ]

  entries, seen = [], set()
  for p in order:
    if null is not None and "" not in seen and null[0] > score_P[p]:
      if len(entries) >= options.n_best_size:
        break
      entries.append(("", *null[1:]))
      seen.add("")
    if len(entries) >= options.n_best_size:
      break
    text = text_of(p)
    if text not in seen:
      seen.add(text)
      entries.append(
        (text, start_logits_FL[feature_P[p], start_P[p]], end_logits_FL[feature_P[p], end_P[p]])
      )
  if null is not None and "" not in seen:
    entries.append(("", *null[1:]))
  return entries or [("", 0.0, 0.0)], text_of(order[0]) if order.size else ""


def predict(examples, features, start_logits, end_logits, options=AnswerOptions()):
  """Every question's answer, n-best list and (v2.0) null odds, as run_squad.py's.

  Args:
    examples: the :class:`bert_jax.tasks.span_qa.reader.SquadExample` list the features came from.
    features: their :class:`bert_jax.tasks.span_qa.features.SquadFeatures`.
    start_logits: float [F, L] start logits of every feature, in feature order.
    end_logits: float [F, L] end logits.
    options: :class:`AnswerOptions`.

  Returns:
    {question id: :class:`QuestionPrediction`}, in example order.

  Raises:
    ValueError: the logits do not match the features.
  """
  start_logits_FL = np.asarray(start_logits, np.float64)
  end_logits_FL = np.asarray(end_logits, np.float64)
  if start_logits_FL.shape != features.input_ids.shape or (
    end_logits_FL.shape != features.input_ids.shape
  ):
    raise ValueError(
      f"logits of shapes {start_logits_FL.shape} / {end_logits_FL.shape} for "
      f"features of shape {features.input_ids.shape}"
    )
  candidates = _candidates(features, start_logits_FL, end_logits_FL, options)
  score_F = candidates[0].max(axis=1)
  null_F = start_logits_FL[:, 0] + end_logits_FL[:, 0]
  # Features are grouped by example, in order: [bounds[e], bounds[e + 1]) are example e's.
  bounds = np.searchsorted(features.example_index, np.arange(len(examples) + 1))
  results = {}
  for e, example in enumerate(examples):
    first, stop = bounds[e], bounds[e + 1]
    if first == stop:
      raise ValueError(f"example {e} (id {example.qid!r}) has no features")
    null = None
    if options.version_2_with_negative:
      f_null = first + int(np.argmin(null_F[first:stop]))  # The first window on ties.
      null = (null_F[f_null], start_logits_FL[f_null, 0], end_logits_FL[f_null, 0])
    entries, text = _nbest(
      example, features, first, stop, (start_logits_FL, end_logits_FL), candidates, null, options
    )
    null_odds = None
    if null is not None:
      null_odds = float(null[0] - np.max(score_F[first:stop]))
      if null_odds > options.null_score_diff_threshold:
        text = ""
    probabilities = _softmax([s + t for _, s, t in entries])
    nbest = [
      {"text": t, "probability": float(p), "start_logit": float(s), "end_logit": float(u)}
      for (t, s, u), p in zip(entries, probabilities, strict=True)
    ]
    results[example.qid] = QuestionPrediction(text, nbest, null_odds)
  return results


def predict_answers(examples, features, start_logits, end_logits, options=AnswerOptions()):
  """{question id: answer text} ("" for no answer) of `predict`."""
  return {
    qid: p.answer
    for qid, p in predict(examples, features, start_logits, end_logits, options).items()
  }
