"""Word-level tagging metrics: seqeval's entity-level precision / recall / F1, token accuracy.

Entities are read from the tags as the CoNLL shared tasks' ``conlleval`` script reads them
(seqeval's default mode): IOB1 and IOB2 both work, an ``I-`` after ``O`` or after another type
starts an entity, a ``B-`` with no ``I-`` is a one-word entity. Scores are micro-averaged over
entities of all types, which is the CoNLL-2003 NER (and CoNLL-2000 chunking) F1.
"""

import re

# Tags seqeval reads as entity chunks: O, or a B/I/E/S prefix, a dash and a type.
_CHUNK_TAG = re.compile(r"O|[BIES]-.+")


def is_chunk_tagset(label_names):
  """True when every label is a chunk tag (NER, chunking); False for e.g. POS tags."""
  return all(_CHUNK_TAG.fullmatch(label) for label in label_names)


def tagging_metrics(true_labels, predicted_labels, entity_level=True):
  """Metrics of word-level label sequences.

  Args:
    true_labels: one list of label strings per sentence.
    predicted_labels: the same shape, predictions.
    entity_level: also compute entity precision / recall / F1 (chunk tag sets only).

  Returns:
    {"accuracy"} (share of words labelled right) and, with ``entity_level``,
    {"precision", "recall", "f1"} over entities; 0 where a denominator is 0.
  """
  # Imported when scoring, so the tools that only time or compile a step run on hosts without
  # seqeval (the task registry imports this module).
  from seqeval import metrics as seqeval_metrics  # pylint: disable=g-import-not-at-top

  result = {"accuracy": float(seqeval_metrics.accuracy_score(true_labels, predicted_labels))}
  if entity_level:
    for name, score in (
      ("precision", seqeval_metrics.precision_score),
      ("recall", seqeval_metrics.recall_score),
      ("f1", seqeval_metrics.f1_score),
    ):
      result[name] = float(score(true_labels, predicted_labels, zero_division=0))
  return result
