"""The examples tools/embed runs: token ids of each input line, padded to the longest.

BERT-style families get ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` (``a ||| b`` is a
sentence pair, the convention of the original BERT's extract_features.py), the longer segment
losing its last tokens first; transformer_xl, a causal LM over token streams, gets a line's
tokens alone (no special tokens, no pairs). With memory across lines, blank lines separate
documents and are not examples.
"""

import dataclasses

import numpy as np

from bert_jax.errors import UserInputError

PAIR_SEPARATOR = "|||"


@dataclasses.dataclass(frozen=True)
class Features:
  """Token ids of the examples, padded to the longest one."""

  input_ids: np.ndarray  # [N, L] int32.
  token_type_ids: np.ndarray  # [N, L] int32.
  lengths: np.ndarray  # [N] int32.


def _truncate(ids_a, ids_b, budget: int):
  """Drops tokens from the end of the longer segment until both fit ``budget`` together."""
  ids_a, ids_b = list(ids_a), list(ids_b)
  while len(ids_a) + len(ids_b) > budget:
    (ids_a if len(ids_a) > len(ids_b) else ids_b).pop()
  return ids_a, ids_b


def featurize(lines, tokenizer, max_seq_length: int) -> Features:
  """[CLS] a [SEP] (b [SEP]) token ids of each line (``a ||| b`` for pairs; the tokenizer's
  pair format, `vocab_types.Vocab.with_special_tokens`), padded with 0.

  Args:
    lines: the examples, one string each.
    tokenizer: a tokenizer of `bert_jax.data.tokenization`.
    max_seq_length: at most this many tokens per example, special tokens included (>= 3).
  """
  parts = [line.split(PAIR_SEPARATOR, 1) for line in lines]
  ids_a = tokenizer.encode_batch([p[0].strip() for p in parts])
  ids_b = tokenizer.encode_batch([p[1].strip() if len(p) > 1 else "" for p in parts])
  rows = []
  for a, b, part in zip(ids_a, ids_b, parts):
    is_pair = len(part) > 1
    budget = max_seq_length - tokenizer.num_special_tokens(is_pair)
    a, b = _truncate(a, b if is_pair else [], budget)
    # BERT: [CLS] a [SEP] b [SEP]; RoBERTa / XLM-R: <s> a </s></s> b </s>.
    ids, len_a = tokenizer.with_special_tokens(a, b if is_pair else None)
    rows.append((ids, [0] * len_a + [1] * (len(ids) - len_a)))
  lengths = np.array([len(ids) for ids, _ in rows], np.int32)
  input_ids = np.zeros((len(rows), int(lengths.max())), np.int32)
  token_type_ids = np.zeros_like(input_ids)
  for i, (ids, types) in enumerate(rows):
    input_ids[i, : len(ids)] = ids
    token_type_ids[i, : len(types)] = types
  return Features(input_ids=input_ids, token_type_ids=token_type_ids, lengths=lengths)


def featurize_plain(lines, tokenizer, max_seq_length: int) -> Features:
  """Each line's tokens without special tokens (segment ids 0), padded with 0.

  Raises:
    UserInputError: a line has no token (a causal LM has nothing to embed there).
  """
  ids = [row[:max_seq_length] for row in tokenizer.encode_batch([line.strip() for line in lines])]
  empty = [i + 1 for i, row in enumerate(ids) if not row]
  if empty:
    raise UserInputError(
      f"example {empty[0]} has no tokens; transformer_xl embeds a line's tokens without "
      "[CLS] / [SEP], so drop empty lines (with --memory_across_lines blank lines end documents)"
    )
  lengths = np.array([len(row) for row in ids], np.int32)
  input_ids = np.zeros((len(ids), int(lengths.max())), np.int32)
  for i, row in enumerate(ids):
    input_ids[i, : len(row)] = row
  return Features(input_ids=input_ids, token_type_ids=np.zeros_like(input_ids), lengths=lengths)


def documents_of(lines):
  """(the non-blank lines, [N] int32 0-based document of each): blank lines end documents."""
  kept, documents, document = [], [], 0
  for line in lines:
    if not line.strip():
      # Only the first blank line after a document's text starts the next document.
      document += bool(documents) and documents[-1] == document
      continue
    kept.append(line)
    documents.append(document)
  return kept, np.array(documents, np.int32)


def examples(lines, tokenizer, max_seq_length: int, family, memory_across_lines: bool):
  """(`Features` of the examples, [N] document of each, or None without memory across lines).

  Args:
    lines: the input lines.
    tokenizer: the run's tokenizer.
    max_seq_length: tokens per example at most.
    family: the run's `family_spec.Family` (memory, plain token streams).
    memory_across_lines: keep the memory across a document's lines.

  Raises:
    UserInputError: memory across lines for a family without memory, no example left, or
      an empty plain (causal LM) example.
  """
  documents = None
  if memory_across_lines:
    if not family.has_memory:
      raise UserInputError(
        f"--memory_across_lines needs a model with memory (xlnet, transformer_xl); this run "
        f"is model.family={family.name!r}"
      )
    lines, documents = documents_of(lines)
    if not lines:
      raise UserInputError("the input has only blank lines; there is no example to embed")
  if family.plain_examples:
    return featurize_plain(lines, tokenizer, max_seq_length), documents
  return featurize(lines, tokenizer, max_seq_length), documents
