"""Tagged sentences -> fixed-length token-classification features, and predictions -> words.

Each word is tokenised on its own into sub-words (WordPiece or SentencePiece through the data
system's tokenizer); its label sits on its FIRST sub-word. The other sub-words, [CLS], [SEP] and
padding carry weight 0, so they count neither in the loss nor in the metrics (BERT paper,
section 5.3). A word the tokenizer turns into no pieces at all (e.g. only control characters)
becomes one [UNK], so every word is predicted.

Long sentences (more than ``max_seq_length - 2`` sub-words) are split into overlapping windows,
as BERT's SQuAD code splits long documents: windows start at word boundaries, the next one at
the first word at least ``stride`` sub-words after the start of the previous one, and each
window holds as many whole words as fit. A word inside several windows is scored (weight 1)
only in the one where it has the most context, min(sub-words before, sub-words after) in that
window, the earlier window on ties (a window left scoring no word is dropped). So every word is
predicted exactly once and predictions map back to words one to one (`word_predictions`). A
word with more sub-words than a window holds keeps its first ones (only the first carries the
label).
"""

import bisect
import dataclasses

import numpy as np

from bert_jax.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class TaggingFeatures:
  """Token-classification features of a list of sentences; F features of length L.

  Attributes:
    input_ids: int32 [F, L]: [CLS] pieces [SEP], then [PAD]s.
    input_mask: int32 [F, L]: 1 on real tokens.
    label_ids: int32 [F, L]: the word's label id on scored first pieces, 0 elsewhere.
    label_weights: float32 [F, L]: 1 on scored first pieces, 0 elsewhere.
    sentence_index: int32 [F]: the sentence each feature comes from.
    word_index: int32 [F, L]: the index in its sentence of the word a scored position labels,
      -1 elsewhere.
  """

  input_ids: np.ndarray
  input_mask: np.ndarray
  label_ids: np.ndarray
  label_weights: np.ndarray
  sentence_index: np.ndarray
  word_index: np.ndarray

  def __len__(self):
    return len(self.sentence_index)

  def arrays(self):
    """The model-facing arrays, with all-zero segment ids (one segment)."""
    return {
      "input_ids": self.input_ids,
      "token_type_ids": np.zeros_like(self.input_ids),
      "input_mask": self.input_mask,
      "label_ids": self.label_ids,
      "label_weights": self.label_weights,
    }


def windows(word_starts, max_pieces, stride):
  """Windows of whole words over a sentence, as ``(first word, end word)`` pairs.

  Args:
    word_starts: int sequence [num_words + 1]: sub-word offset of each word, then the total.
    max_pieces: the most sub-words in one window; no single word may have more.
    stride: sub-words from one window's start to the next one's (at least; next word boundary).

  Returns:
    Windows covering every word, consecutive windows overlapping or touching.
  """
  num_words = len(word_starts) - 1
  result, start = [], 0
  while True:
    end = bisect.bisect_right(word_starts, word_starts[start] + max_pieces, lo=start + 1) - 1
    result.append((start, end))
    if end >= num_words:
      return result
    # The first word at least `stride` pieces on, but never past `end` (no word is skipped).
    start = bisect.bisect_left(word_starts, word_starts[start] + stride, lo=start + 1, hi=end)


def _scoring_windows(word_starts, spans):
  """For each word, the index of the window where it has the most context (earliest on ties)."""
  num_words = len(word_starts) - 1
  best_window = np.full(num_words, -1, np.int64)
  best_context = np.full(num_words, -1, np.int64)
  for w, (first, end) in enumerate(spans):
    words = np.arange(first, end)
    context = np.minimum(
      word_starts[words] - word_starts[first], word_starts[end] - word_starts[words + 1]
    )
    better = context > best_context[words]
    best_window[words[better]] = w
    best_context[words[better]] = context[better]
  return best_window


def tagging_features(sentences, label_names, tokenizer, max_seq_length, stride):
  """Builds the features of ``sentences``.

  Args:
    sentences: :class:`bert_jax.tasks.tagging.reader.TaggedSentence` list.
    label_names: label names in id order; every label of ``sentences`` must be among them.
    tokenizer: a tokenizer of `bert_jax.data.tokenization` (``encode_batch``, ``special_ids``).
    max_seq_length: L, [CLS] and [SEP] included.
    stride: sub-words between window starts in long sentences (see the module docstring).

  Returns:
    :class:`TaggingFeatures`: the windows of each sentence in order, sentences in order.

  Raises:
    UserInputError: a label outside ``label_names``, or L / stride too small.
  """
  max_pieces = max_seq_length - 2
  if max_pieces < 1 or stride < 1:
    raise UserInputError(
      f"data.max_seq_length={max_seq_length} and data.doc_stride={stride} "
      "leave no room for a word; use max_seq_length >= 3, doc_stride >= 1"
    )
  label_id = {name: i for i, name in enumerate(label_names)}
  special = tokenizer.special_ids
  all_words = [word for sentence in sentences for word in sentence.words]
  all_pieces = [
    pieces[:max_pieces] or [special.unk] for pieces in tokenizer.encode_batch(all_words)
  ]
  rows = {key: [] for key in ("input_ids", "label_ids", "word_index")}
  sentence_index = []
  offset = 0
  for s, sentence in enumerate(sentences):
    pieces = all_pieces[offset : offset + len(sentence.words)]
    offset += len(sentence.words)
    try:
      labels = [label_id[label] for label in sentence.labels]
    except KeyError as e:
      raise UserInputError(
        f"label {e.args[0]!r} of sentence {s} is not in the label names "
        f"{list(label_names)}; add it to data.label_names"
      ) from None
    word_starts = np.cumsum([0] + [len(p) for p in pieces])
    spans = windows(word_starts, max_pieces, stride)
    scored_in = _scoring_windows(word_starts, spans)
    for w, (first, end) in enumerate(spans):
      if not (scored_in[first:end] == w).any():
        continue  # Every word of this window has more context in another one.
      ids, label_row, word_row = [special.cls], [0], [-1]
      for i in range(first, end):
        scored = scored_in[i] == w
        ids.extend(pieces[i])
        label_row.extend([labels[i] if scored else 0] + [0] * (len(pieces[i]) - 1))
        word_row.extend([i if scored else -1] + [-1] * (len(pieces[i]) - 1))
      ids.append(special.sep)
      label_row.append(0)
      word_row.append(-1)
      rows["input_ids"].append(ids)
      rows["label_ids"].append(label_row)
      rows["word_index"].append(word_row)
      sentence_index.append(s)
  input_ids = _pad(rows["input_ids"], max_seq_length, special.pad)
  word_index = _pad(rows["word_index"], max_seq_length, -1)
  return TaggingFeatures(
    input_ids=input_ids,
    input_mask=_pad([[1] * len(r) for r in rows["input_ids"]], max_seq_length, 0),
    label_ids=_pad(rows["label_ids"], max_seq_length, 0),
    label_weights=(word_index >= 0).astype(np.float32),
    sentence_index=np.asarray(sentence_index, np.int32),
    word_index=word_index,
  )


def _pad(rows, length, value):
  out = np.full((len(rows), length), value, np.int32)
  for i, row in enumerate(rows):
    out[i, : len(row)] = row
  return out


def word_predictions(features, predicted_ids, sentence_lengths):
  """Maps per-position predictions back to one prediction per word.

  Args:
    features: the :class:`TaggingFeatures` the predictions are for.
    predicted_ids: int [F, L] predicted label ids, features in order.
    sentence_lengths: number of words of each sentence.

  Returns:
    One list of label ids per sentence, one id per word.

  Raises:
    ValueError: a word got no prediction or two (features and predictions do not match).
  """
  predicted_ids = np.asarray(predicted_ids)
  if predicted_ids.shape != features.word_index.shape:
    raise ValueError(
      f"predictions of shape {predicted_ids.shape} for features of shape "
      f"{features.word_index.shape}"
    )
  result = [np.full(n, -1, np.int64) for n in sentence_lengths]
  filled = 0
  for f, words in enumerate(features.word_index):
    positions = np.flatnonzero(words >= 0)
    target = result[features.sentence_index[f]]
    if (target[words[positions]] >= 0).any():
      raise ValueError(f"feature {f} predicts a word already predicted")
    target[words[positions]] = predicted_ids[f, positions]
    filled += len(positions)
  if filled != sum(sentence_lengths):
    raise ValueError(f"{sum(sentence_lengths) - filled} words have no prediction")
  return [r.tolist() for r in result]
