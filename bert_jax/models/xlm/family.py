"""The xlm family's `family_spec.Family` record (registered in `models/families.py`)."""

from bert_jax import names
from bert_jax.models import flops
from bert_jax.models.family_spec import CROSS_LINGUAL_LM, Family, module_interop
from bert_jax.models.xlm import hf, options
from bert_jax.models.xlm.model import XlmEncoder, XlmWithLMHead

FAMILY = Family(
  names.XLM,
  XlmEncoder,
  XlmWithLMHead,
  train_flops=flops.masked_lm_train_flops,
  # MLM, CLM and TLM over its own data (tasks/xlm_pretraining.py, data/parallel_pairs.py).
  pretraining_objective=CROSS_LINGUAL_LM,
  sentence_head=False,
  hf=module_interop("XLM", hf),
  languages=lambda config: config.xlm.languages,
  sections=options.SECTIONS,
)
