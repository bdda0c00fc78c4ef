"""The distilbert family's `family_spec.Family` record (registered in `models/families.py`)."""

from bert_jax import names
from bert_jax.models import flops
from bert_jax.models.distilbert import hf as hf_distilbert
from bert_jax.models.distilbert.model import DistilBertEncoder, DistilBertForMaskedLM
from bert_jax.models.family_spec import Family, module_interop

FAMILY = Family(
  names.DISTILBERT,
  DistilBertEncoder,
  DistilBertForMaskedLM,
  train_flops=flops.masked_lm_train_flops,
  sentence_head=False,
  hf=module_interop("DistilBERT", hf_distilbert),
)
