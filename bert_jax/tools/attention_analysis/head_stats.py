"""What every head does in general (Clark et al., 2019, section 3), on token-level attention.

Averaged over every token of every sentence analysed (special tokens included, as the paper
does): the attention paid to the first special token ([CLS] / <s>), to the separators
([SEP] / </s>), to punctuation (the tokens of words tagged PUNCT, or made of punctuation
characters where the file gives no tag), to the previous and to the next token (over the
tokens that have one), and the entropy of the attention distribution (nats).
"""

import unicodedata

import numpy as np

STATISTICS = ("first_special", "separator", "punctuation", "previous", "next", "entropy")
_PUNCT = "PUNCT"


def is_punctuation(form: str, upos: str) -> bool:
  """A word is punctuation by its UPOS tag, or by its characters where it has none ("_")."""
  if upos != "_":
    return upos == _PUNCT
  return all(unicodedata.category(char).startswith("P") for char in form)


class HeadStatistics:
  """Sums of each statistic per layer and head plus their denominators, sentence by sentence."""

  def __init__(self, num_layers: int, num_heads: int):
    self._sums = {name: np.zeros((num_layers, num_heads)) for name in STATISTICS}
    self._tokens = 0
    self._neighbours = 0  # Tokens with a previous token (as many as with a next one).

  def add(self, attention_NHTT, separator_T, punctuation_T):
    """Adds one example.

    Args:
      attention_NHTT: [layers, heads, T, T] its attention over its T tokens (no padding).
      separator_T: [T] bool, the separator tokens.
      punctuation_T: [T] bool, the punctuation tokens.
    """
    attention = np.asarray(attention_NHTT, np.float64)
    length = attention.shape[-1]
    sums = self._sums
    sums["first_special"] += attention[..., 0].sum(axis=-1)
    sums["separator"] += attention[..., separator_T].sum(axis=(-2, -1))
    sums["punctuation"] += attention[..., punctuation_T].sum(axis=(-2, -1))
    sums["previous"] += np.diagonal(attention, offset=-1, axis1=-2, axis2=-1).sum(axis=-1)
    sums["next"] += np.diagonal(attention, offset=1, axis1=-2, axis2=-1).sum(axis=-1)
    logs = np.log(np.where(attention > 0, attention, 1.0))
    sums["entropy"] -= (attention * logs).sum(axis=(-2, -1))
    self._tokens += length
    self._neighbours += length - 1

  def means(self) -> dict:
    """Statistic -> [layers, heads] mean over the tokens added."""
    denominators = {"previous": self._neighbours, "next": self._neighbours}
    return {
      name: total / max(denominators.get(name, self._tokens), 1)
      for name, total in self._sums.items()
    }
