"""Multiple-choice examples -> [N, C, L] features: one ``[CLS] A [SEP] B [SEP]`` row per choice.

Sentence A is the context, sentence B the continuation's start followed by the candidate ending
(BERT paper, section 4.4). A pair longer than ``max_seq_length - 3`` tokens loses tokens from the
end of its longer segment, one at a time, B first on ties (BERT's ``_truncate_seq_pair``).
"""

import dataclasses

import numpy as np

from bert_jax.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class ChoiceFeatures:
  """Features of N examples with C choices each, rows of length L.

  Attributes:
    input_ids: int32 [N, C, L].
    token_type_ids: int32 [N, C, L]: 0 on [CLS] A [SEP], 1 on B [SEP].
    input_mask: int32 [N, C, L]: 1 on real tokens.
    labels: int32 [N]: index of the true choice.
  """

  input_ids: np.ndarray
  token_type_ids: np.ndarray
  input_mask: np.ndarray
  labels: np.ndarray

  def __len__(self):
    return len(self.labels)

  def arrays(self):
    return dataclasses.asdict(self)


def _truncate_pair(tokens_a, tokens_b, max_tokens):
  """Shortens the longer of the two lists (B on ties) from the end until both fit."""
  while len(tokens_a) + len(tokens_b) > max_tokens:
    (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def choice_features(examples, tokenizer, max_seq_length):
  """Builds the features of ``examples``.

  Args:
    examples: :class:`bert_jax.tasks.multiple_choice.reader.ChoiceExample` list, all with C endings.
    tokenizer: a tokenizer of `bert_jax.data.tokenization`.
    max_seq_length: L, [CLS] and both [SEP]s included.

  Returns:
    :class:`ChoiceFeatures` in example order.
  """
  if max_seq_length < 5:
    raise UserInputError(
      f"data.max_seq_length={max_seq_length} leaves no room for a choice "
      "([CLS] A [SEP] B [SEP]); use at least 5"
    )
  num_choices = len(examples[0].endings)
  special = tokenizer.special_ids
  contexts = tokenizer.encode_batch([e.context for e in examples])
  continuations = tokenizer.encode_batch(
    [f"{e.start} {ending}".strip() for e in examples for ending in e.endings]
  )
  shape = (len(examples), num_choices, max_seq_length)
  input_ids = np.full(shape, special.pad, np.int32)
  token_type_ids = np.zeros(shape, np.int32)
  input_mask = np.zeros(shape, np.int32)
  for n in range(len(examples)):
    for c in range(num_choices):
      tokens_a = list(contexts[n])
      tokens_b = list(continuations[n * num_choices + c])
      _truncate_pair(tokens_a, tokens_b, max_seq_length - tokenizer.num_special_tokens(True))
      # [CLS] A [SEP] B [SEP]; RoBERTa / XLM-R vocabs: <s> A </s></s> B </s>.
      row, len_a = tokenizer.with_special_tokens(tokens_a, tokens_b)
      input_ids[n, c, : len(row)] = row
      token_type_ids[n, c, len_a : len(row)] = 1
      input_mask[n, c, : len(row)] = 1
  labels = np.asarray([e.label for e in examples], np.int32)
  return ChoiceFeatures(
    input_ids=input_ids, token_type_ids=token_type_ids, input_mask=input_mask, labels=labels
  )
