"""What every tokenizer's vocabulary exposes: its entries in id order and its special ids.

The WordPiece and SentencePiece tokenizers (`tokenization`) and the fairseq-layout ones
(`bpe_tokenization`) all build on `Vocab`; the batch builders take `SpecialTokenIds`.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class SpecialTokenIds:
  """Ids of the special tokens BERT pretraining needs."""

  pad: int
  unk: int
  cls: int
  sep: int
  mask: int


class Vocab:
  """What every tokenizer exposes about its vocab: entries in id order and the special ids.

  Subclasses set ``_tokens`` (a tuple of strings in id order) and ``_special_ids``.
  """

  _tokens: tuple[str, ...]
  _special_ids: SpecialTokenIds
  pair_separators = 1  # [SEP]s between a pair's segments: BERT's one, RoBERTa's two.

  def with_special_tokens(self, ids_a, ids_b=None):
    """``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` (RoBERTa: ``<s> A </s></s> B </s>``).

    Returns:
      (ids, number of leading ids in segment A, the rest being segment B).
    """
    special = self._special_ids
    first = [special.cls, *ids_a, special.sep]
    if ids_b is None:
      return first, len(first)
    return first + [special.sep] * (self.pair_separators - 1) + [*ids_b, special.sep], len(first)

  def num_special_tokens(self, pair: bool) -> int:
    """How many ids `with_special_tokens` adds to one segment or a pair."""
    return 2 + self.pair_separators if pair else 2

  @property
  def vocab_size(self):
    """Number of entries in the vocab."""
    return len(self._tokens)

  @property
  def special_ids(self):
    """The :class:`SpecialTokenIds` of this vocab."""
    return self._special_ids

  @property
  def tokens(self):
    """The vocab as a tuple of strings in id order."""
    return self._tokens

  def convert_ids_to_tokens(self, ids):
    """The vocab strings of ``ids``, for inspecting batches."""
    return [self._tokens[i] for i in ids]
