"""The roberta family's `family_spec.Family` record (registered in `models/families.py`)."""

from bert_jax import names
from bert_jax.models import flops
from bert_jax.models.family_spec import Family
from bert_jax.models.roberta import hf, options
from bert_jax.models.roberta.model import RobertaEncoder, RobertaForMaskedLM

FAMILY = Family(
  names.ROBERTA,
  RobertaEncoder,
  RobertaForMaskedLM,
  train_flops=flops.masked_lm_train_flops,
  sentence_head=False,
  hf=hf.interop(names.ROBERTA, "roberta", "RoBERTa", "Roberta"),
  sections=options.SECTIONS,
)
