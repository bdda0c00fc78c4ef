"""RoBERTa's and XLM-R's options (``model.roberta``): the padding index positions count past."""

import dataclasses

from bert_jax.config_fields import option
from bert_jax.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class RobertaOptions:
  """Options of ``model.family='roberta'`` and ``'xlm_roberta'`` (ignored by other families)."""

  padding_idx: int = option(
    1,
    help="roberta, xlm_roberta: the padding index (Hugging Face's pad_token_id; fairseq's 1); "
    "real tokens get positions padding_idx + 1, padding_idx + 2, ... and padding padding_idx.",
  )

  def __post_init__(self):
    if not isinstance(self.padding_idx, int) or self.padding_idx < 0:
      raise UserInputError(
        f"model.roberta.padding_idx={self.padding_idx!r} must be an int >= 0 (fairseq's is 1)"
      )


# The config section(s) of families roberta and xlm_roberta (`family_spec.Family.sections`).
SECTIONS = {"roberta": RobertaOptions}
