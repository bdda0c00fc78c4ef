"""SpanBERT's span boundary objective (``model.span_boundary``; Joshi et al. 2020).

An extra head on any masked-LM family predicts each masked token of a span from the span's two
boundary tokens and the token's offset in the span (`span_boundary.py`).
"""

import dataclasses

from bert_jax.config_fields import option
from bert_jax.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class SpanBoundaryOptions:
  """Options of the span boundary objective (off by default)."""

  enabled: bool = option(False, help="Add SpanBERT's SBO head and its loss (sbo_loss).")
  max_offset: int = option(
    10, help="Rows of its relative-position table; offsets in a span are clipped to it."
  )

  def __post_init__(self):
    if self.max_offset < 1:
      raise UserInputError(
        f"model.span_boundary.max_offset={self.max_offset} must be >= 1 (SpanBERT: 10)"
      )
