"""Segment recurrence options (``model.recurrence``) of the xlnet and transformer_xl families.

Both families cache each layer's hidden states as the next segment's memory and encode
relative distances (Dai et al. 2019); the keys here size that memory and its positions. Other
families leave the section at its defaults (`recurrence.py` computes it).
"""

import dataclasses

from bert_jax.config_fields import option
from bert_jax.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class RecurrenceOptions:
  """Options of the families with segment memory: xlnet, transformer_xl."""

  mem_len: int = option(
    0, help="Hidden states of earlier segments each layer attends to (the memory); 0 = none."
  )
  eval_mem_len: int = option(
    -1,
    help="Causal LM (data.objective='clm'): memory at evaluation, may exceed mem_len "
    "(Transformer-XL evaluates with a longer one); -1 = mem_len, 0 = no memory.",
  )
  clamp_len: int = option(
    -1, help="Relative distances beyond this are clipped to it; -1 = no clipping."
  )
  same_length: bool = option(
    False,
    help="transformer_xl: every token attends to exactly mem_len keys (itself and the "
    "mem_len - 1 before it), as HF TransfoXL's same_length; needs mem_len > 0.",
  )
  untie_r: bool = option(
    True,
    help="transformer_xl: each layer has its own r_w_bias / r_r_bias (False: one pair shared "
    "by all layers; xlnet always unties).",
  )

  def __post_init__(self):
    if self.mem_len < 0:
      raise UserInputError(
        f"model.recurrence.mem_len={self.mem_len} must be >= 0; use 0 for no memory of "
        "earlier segments"
      )
    if self.eval_mem_len < -1:
      raise UserInputError(
        f"model.recurrence.eval_mem_len={self.eval_mem_len} must be >= -1; use -1 for "
        "mem_len, 0 for no memory at evaluation"
      )
    if self.same_length and self.mem_len <= 0:
      raise UserInputError(
        "model.recurrence.same_length=True makes every token attend to mem_len keys, but "
        f"model.recurrence.mem_len={self.mem_len}; set model.recurrence.mem_len > 0 or "
        "model.recurrence.same_length=False"
      )


def check_own_layers(config):
  """A family with segment memory runs its own layers (`recurrence.py`), unscanned and not
  reversible: its `family_spec.Family.check_config`.

  Raises:
    UserInputError: ``config`` (a `ModelConfig`) scans or reverses layers.
  """
  if config.scan_layers or config.reversible:
    raise UserInputError(
      f"model.family={config.family!r} runs its own unscanned, non-reversible layers; set "
      "model.scan_layers=False and model.reversible=False"
    )


def with_recurrence(config, **changes):
  """``config`` (a `ModelConfig`) with ``changes`` to its ``recurrence`` section."""
  return dataclasses.replace(config, recurrence=dataclasses.replace(config.recurrence, **changes))
