"""ALBERT's cross-layer parameter sharing (``model.albert``; Lan et al. 2020)."""

import dataclasses

from bert_jax.config_fields import option
from bert_jax.errors import UserInputError

# Every layer's weights, only attention's, only the FFN's, none.
LAYER_SHARING = ("all", "attention", "ffn", "none")


@dataclasses.dataclass(frozen=True)
class AlbertOptions:
  """Options of ``model.family='albert'`` (ignored by other families)."""

  layer_sharing: str = option(
    "all", help=f"Cross-layer sharing: {' | '.join(LAYER_SHARING)} (ALBERT: all)."
  )

  def __post_init__(self):
    if self.layer_sharing not in LAYER_SHARING:
      raise UserInputError(
        f"model.albert.layer_sharing={self.layer_sharing!r} is unknown; "
        f"choose one of {', '.join(LAYER_SHARING)}"
      )
