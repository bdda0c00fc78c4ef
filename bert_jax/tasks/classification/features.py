"""Sentence (pair) classification and regression features: examples -> model inputs and labels.

Features are ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` token ids through the data
system's tokenizer (WordPiece or SentencePiece; RoBERTa's vocabs: ``<s> A </s></s> B </s>``),
segment ids 0 on A and 1 on B. A pair longer than ``max_seq_length`` less its special tokens
loses tokens from the end of its longer sentence, one at a time (B on ties), as BERT's
``run_classifier`` does; a single sentence is cut to ``max_seq_length - 2``.
"""

import numpy as np


def _truncate_pair(ids_a, ids_b, max_tokens):
  """Shortens the longer list (B on ties) from the end until both fit in ``max_tokens``."""
  ids_a, ids_b = list(ids_a), list(ids_b)
  while len(ids_a) + len(ids_b) > max_tokens:
    (ids_a if len(ids_a) > len(ids_b) else ids_b).pop()
  return ids_a, ids_b


def sentence_features(examples, tokenizer, max_seq_length):
  """Model inputs and labels of sentence or sentence-pair examples.

  Args:
    examples: `reader.SentenceExample` list (all single sentences, or all pairs).
    tokenizer: a tokenizer of `bert_jax.data.tokenization`.
    max_seq_length: L, [CLS] and [SEP]s included.

  Returns:
    {"input_ids", "token_type_ids", "input_mask": int32 [N, L], "labels": int32 [N] (or
    float32 [N] for float labels)}.
  """
  special = tokenizer.special_ids
  ids_a = tokenizer.encode_batch([e.text_a for e in examples])
  pairs = examples[0].text_b is not None
  ids_b = tokenizer.encode_batch([e.text_b for e in examples]) if pairs else None
  input_ids = np.full((len(examples), max_seq_length), special.pad, np.int32)
  token_type_ids = np.zeros((len(examples), max_seq_length), np.int32)
  budget = max_seq_length - tokenizer.num_special_tokens(pairs)
  for row in range(len(examples)):
    if pairs:
      a, b = _truncate_pair(ids_a[row], ids_b[row], budget)
      tokens, len_a = tokenizer.with_special_tokens(a, b)
      token_type_ids[row, len_a : len(tokens)] = 1
    else:
      tokens, _ = tokenizer.with_special_tokens(ids_a[row][:budget])
    input_ids[row, : len(tokens)] = tokens
  labels = np.array([e.label for e in examples])
  return {
    "input_ids": input_ids,
    "token_type_ids": token_type_ids,
    "input_mask": (input_ids != special.pad).astype(np.int32),
    "labels": labels.astype(np.float32 if labels.dtype.kind == "f" else np.int32),
  }
