"""ALBERT's cross-layer parameter sharing (``model.albert``; Lan et al. 2020)."""

import dataclasses

from bert_jax import names
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

  def check_model(self, config):
    """Sharing modes the stacks of family albert cannot run (`model.py`).

    Raises:
      UserInputError: ``config`` (a `ModelConfig`) is an albert model whose sharing clashes
        with reversible or scanned layers.
    """
    if config.family != names.ALBERT or self.layer_sharing == "none":
      return
    if config.reversible:
      raise UserInputError(
        f"model.reversible=True needs model.albert.layer_sharing='none' for family albert "
        f"(got {self.layer_sharing!r}); reversible layers each hold their own weights"
      )
    if config.scan_layers and self.layer_sharing != "all":
      raise UserInputError(
        "model.scan_layers=True with model.albert.layer_sharing="
        f"{self.layer_sharing!r} is not "
        "supported; use model.albert.layer_sharing 'all' or 'none', or scan_layers=False"
      )


# The config section(s) of family albert (`family_spec.Family.sections`).
SECTIONS = {"albert": AlbertOptions}
