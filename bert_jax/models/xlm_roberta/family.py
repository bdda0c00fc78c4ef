"""The xlm_roberta family's `family_spec.Family` record (registered in `models/families.py`):
RoBERTa's modules and weight tables under XLM-R's names."""

from bert_jax import names
from bert_jax.models import flops
from bert_jax.models.family_spec import Family
from bert_jax.models.roberta import hf, options
from bert_jax.models.roberta.model import RobertaEncoder, RobertaForMaskedLM

FAMILY = Family(
  names.XLM_ROBERTA,
  RobertaEncoder,
  RobertaForMaskedLM,
  train_flops=flops.masked_lm_train_flops,
  sentence_head=False,
  hf=hf.interop(names.XLM_ROBERTA, "xlm-roberta", "XLM-R", "XLMRoberta"),
  sections=options.SECTIONS,  # RoBERTa's, shared.
)
