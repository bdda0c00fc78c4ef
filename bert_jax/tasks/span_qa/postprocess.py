"""Span-QA logits -> answer texts (host side, numpy), as the original BERT's SQuAD predictions.

For each feature the ``n_best_size`` highest start and end logits are paired; a pair is a
candidate when both ends lie in the context, the start token has its max context in this window
(see `features.squad_features`), the end is not before the start and the span has at most
``max_answer_length`` tokens. An example's answer is its best candidate (start + end logit) over
all its windows, cut from the original context through the tokens' character offsets.

SQuAD 2.0: the null score of a window is its [CLS] start + end logit, the example's null score
the smallest over its windows; the answer is empty when
``null score - best candidate score > null_score_diff_threshold`` (or when no candidate exists).
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


def _best_spans(features, start_logits_FL, end_logits_FL, options):
  """Per feature: best candidate score (-inf if none) and its start / end positions."""
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
  valid_FKK = (start_ok_FK[:, :, None] & end_ok_FK[:, None, :] & (span_FKK >= 0) &
               (span_FKK < options.max_answer_length))
  score_FKK = (start_logits_FL[rows_F1, starts_FK][:, :, None] +
               end_logits_FL[rows_F1, ends_FK][:, None, :])
  score_FP = np.where(valid_FKK, score_FKK, -np.inf).reshape(num_features, k * k)
  best_F = np.argmax(score_FP, axis=1)  # The first (start rank, end rank) pair on ties.
  rows_F = np.arange(num_features)
  return (score_FP[rows_F, best_F], starts_FK[rows_F, best_F // k],
          ends_FK[rows_F, best_F % k])


def predict_answers(examples, features, start_logits, end_logits, options=AnswerOptions()):
  """The answer text of every example.

  Args:
    examples: the :class:`bert_jax.tasks.span_qa.reader.SquadExample` list the features came from.
    features: their :class:`bert_jax.tasks.span_qa.features.SquadFeatures`.
    start_logits: float [F, L] start logits of every feature, in feature order.
    end_logits: float [F, L] end logits.
    options: :class:`AnswerOptions`.

  Returns:
    {question id: answer text}; "" for no answer.

  Raises:
    ValueError: the logits do not match the features.
  """
  start_logits_FL = np.asarray(start_logits, np.float64)
  end_logits_FL = np.asarray(end_logits, np.float64)
  if start_logits_FL.shape != features.input_ids.shape or (
      end_logits_FL.shape != features.input_ids.shape):
    raise ValueError(f"logits of shapes {start_logits_FL.shape} / {end_logits_FL.shape} for "
                     f"features of shape {features.input_ids.shape}")
  score_F, start_F, end_F = _best_spans(features, start_logits_FL, end_logits_FL, options)
  null_F = start_logits_FL[:, 0] + end_logits_FL[:, 0]
  # Features are grouped by example, in order: [bounds[e], bounds[e + 1]) are example e's.
  bounds = np.searchsorted(features.example_index, np.arange(len(examples) + 1))
  answers = {}
  for e, example in enumerate(examples):
    first, stop = bounds[e], bounds[e + 1]
    if first == stop:
      raise ValueError(f"example {e} (id {example.qid!r}) has no features")
    f = first + int(np.argmax(score_F[first:stop]))
    text = ""
    if np.isfinite(score_F[f]):
      text = example.context[features.token_offsets[f, start_F[f], 0]:
                             features.token_offsets[f, end_F[f], 1]]
      if options.version_2_with_negative and (
          np.min(null_F[first:stop]) - score_F[f] > options.null_score_diff_threshold):
        text = ""
    answers[example.qid] = text
  return answers
