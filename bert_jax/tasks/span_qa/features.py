"""SQuAD questions -> fixed-length span-QA features: doc-stride windows, labels, offsets.

Each feature is ``[CLS] question [SEP] context window [SEP]`` padded to ``max_seq_length``
(segment 0 up to the first [SEP], 1 after), as in the original BERT:

* the question keeps its first ``max_query_length`` tokens;
* the context is cut into windows of ``max_seq_length - len(question) - 3`` tokens, each
  starting ``doc_stride`` tokens after the previous one (right after it if the stride is
  longer than a window), the last one ending at the context's end, so every context token is
  in at least one window;
* labels are the answer's first and last token in the row; 0 ([CLS]) when the answer is not
  wholly inside the window or the question has no answer (SQuAD 2.0);
* a token inside several windows has its "max context" in the one where
  ``min(tokens left of it, tokens right of it) + 0.01 * window length`` is largest (the first on
  ties): post-processing lets answers start only there.

Tokens carry their character span in the original context, so predictions become exact
context text without detokenising.
"""

import dataclasses

import numpy as np

from bert_jax.errors import UserInputError

# Offsets row of a position outside the context ([CLS], question, [SEP], padding).
NOT_CONTEXT = -1


@dataclasses.dataclass(frozen=True)
class SquadFeatures:
  """Features of a list of examples; F features of length L.

  Attributes:
    input_ids: int32 [F, L].
    token_type_ids: int32 [F, L]: 0 for [CLS] question [SEP], 1 for the window and its [SEP].
    input_mask: int32 [F, L]: 1 on real tokens.
    start_positions: int32 [F]: the answer's first token in the row, 0 when absent.
    end_positions: int32 [F]: its last token, 0 when absent.
    example_index: int32 [F]: the example each feature comes from (features in example order).
    token_offsets: int32 [F, L, 2]: a context token's (start, end) characters in its context,
      ``NOT_CONTEXT`` elsewhere.
    max_context: bool [F, L]: the context token has its most context in this window.
  """

  input_ids: np.ndarray
  token_type_ids: np.ndarray
  input_mask: np.ndarray
  start_positions: np.ndarray
  end_positions: np.ndarray
  example_index: np.ndarray
  token_offsets: np.ndarray
  max_context: np.ndarray

  def __len__(self):
    return len(self.example_index)

  def arrays(self):
    """The model-facing arrays (inputs and labels)."""
    return {
      "input_ids": self.input_ids,
      "token_type_ids": self.token_type_ids,
      "input_mask": self.input_mask,
      "start_positions": self.start_positions,
      "end_positions": self.end_positions,
    }


def check_lengths(max_seq_length, max_query_length, doc_stride):
  """Raises unless a window keeps at least one context token after the longest question."""
  if max_query_length < 1 or doc_stride < 1:
    raise UserInputError(
      f"data.max_query_length={max_query_length} and data.doc_stride="
      f"{doc_stride} must be at least 1 (BERT: 64 and 128)"
    )
  if max_seq_length - max_query_length - 3 < 1:
    raise UserInputError(
      f"data.max_seq_length={max_seq_length} leaves no room for context after a "
      f"{max_query_length}-token question, [CLS] and two [SEP]s; raise max_seq_length or "
      "lower data.max_query_length"
    )


def doc_windows(num_tokens, window_length, doc_stride):
  """(start, length) of the windows over ``num_tokens`` context tokens.

  Windows start every ``doc_stride`` tokens (every ``window_length`` when the stride is longer,
  so no token is skipped) until one reaches the end; at least one window, empty for an empty
  context.
  """
  windows, start = [], 0
  while True:
    length = min(num_tokens - start, window_length)
    windows.append((start, length))
    if start + length >= num_tokens:
      return windows
    start += min(length, doc_stride)


def max_context_windows(windows, num_tokens):
  """For each context token, the index of the window where it has the most context."""
  score_WT = np.full((len(windows), num_tokens), -np.inf)
  for w, (start, length) in enumerate(windows):
    positions = np.arange(length)
    score_WT[w, start : start + length] = (
      np.minimum(positions, length - 1 - positions) + 0.01 * length
    )
  return np.argmax(score_WT, axis=0)  # The first window on ties, as the original BERT.


def answer_token_span(offsets_T2, char_start, char_end):
  """First and last context token overlapping characters [char_start, char_end); None if none."""
  first = int(np.searchsorted(offsets_T2[:, 1], char_start, side="right"))
  last = int(np.searchsorted(offsets_T2[:, 0], char_end, side="left")) - 1
  return (first, last) if first <= last else None


def squad_features(examples, tokenizer, *, max_seq_length, max_query_length, doc_stride):
  """Builds the features of ``examples``.

  Args:
    examples: :class:`bert_jax.tasks.span_qa.reader.SquadExample` list.
    tokenizer: a `bert_jax.data.tokenization.WordPieceTokenizer` (it gives character offsets).
    max_seq_length: L.
    max_query_length: question tokens kept.
    doc_stride: tokens between the starts of consecutive context windows.

  Returns:
    :class:`SquadFeatures`, windows in example order. Labels use each example's first answer.
  """
  check_lengths(max_seq_length, max_query_length, doc_stride)
  if not hasattr(tokenizer, "encode_batch_with_offsets"):
    raise UserInputError(
      "SQuAD features need each token's characters in the context, which the WordPiece "
      "tokenizer gives; set data.vocab_path to a WordPiece vocab.txt, not a SentencePiece "
      ".model"
    )
  special = tokenizer.special_ids
  contexts = sorted({e.context for e in examples})  # Paragraphs repeat once per question.
  context_index = {c: i for i, c in enumerate(contexts)}
  context_tokens = tokenizer.encode_batch_with_offsets(contexts)
  questions = tokenizer.encode_batch_with_offsets([e.question for e in examples])
  rows = []  # (ids, question part length, start label, end label, example, offsets, max ctx)
  for e, example in enumerate(examples):
    ids_T, offsets_T2 = context_tokens[context_index[example.context]]
    question_ids = questions[e][0][:max_query_length]
    window_length = max_seq_length - len(question_ids) - 3
    windows = doc_windows(len(ids_T), window_length, doc_stride)
    best_window_T = max_context_windows(windows, len(ids_T))
    answer = None  # An answer of only characters the tokenizer drops has no tokens: [CLS].
    if not example.is_impossible:
      char_start = example.answer_starts[0]
      answer = answer_token_span(offsets_T2, char_start, char_start + len(example.answer_texts[0]))
    prefix = [special.cls, *question_ids, special.sep]
    for w, (start, length) in enumerate(windows):
      ids = np.concatenate([prefix, ids_T[start : start + length], [special.sep]])
      offset = len(prefix) - start  # Row position of context token t is t + offset.
      first, last = 0, 0
      if answer is not None and start <= answer[0] and answer[1] < start + length:
        first, last = answer[0] + offset, answer[1] + offset
      offsets_L2 = np.full((max_seq_length, 2), NOT_CONTEXT, np.int32)
      offsets_L2[len(prefix) : len(prefix) + length] = offsets_T2[start : start + length]
      max_context_L = np.zeros(max_seq_length, bool)
      max_context_L[len(prefix) : len(prefix) + length] = best_window_T[start : start + length] == w
      rows.append((ids, len(prefix), first, last, e, offsets_L2, max_context_L))
  num = len(rows)
  input_ids = np.full((num, max_seq_length), special.pad, np.int32)
  input_mask = np.zeros((num, max_seq_length), np.int32)
  token_type_ids = np.zeros((num, max_seq_length), np.int32)
  for f, (ids, prefix_length, *_) in enumerate(rows):
    input_ids[f, : len(ids)] = ids
    input_mask[f, : len(ids)] = 1
    token_type_ids[f, prefix_length : len(ids)] = 1
  return SquadFeatures(
    input_ids=input_ids,
    token_type_ids=token_type_ids,
    input_mask=input_mask,
    start_positions=np.array([r[2] for r in rows], np.int32).reshape(num),
    end_positions=np.array([r[3] for r in rows], np.int32).reshape(num),
    example_index=np.array([r[4] for r in rows], np.int32).reshape(num),
    token_offsets=np.stack([r[5] for r in rows])
    if rows
    else np.zeros((0, max_seq_length, 2), np.int32),
    max_context=np.stack([r[6] for r in rows]) if rows else np.zeros((0, max_seq_length), bool),
  )
