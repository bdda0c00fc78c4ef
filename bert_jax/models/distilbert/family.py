"""The distilbert family's `family_spec.Family` record (registered in `models/families.py`)."""

from bert_jax import names
from bert_jax.models import flops
from bert_jax.models.distilbert import hf as hf_distilbert
from bert_jax.models.distilbert.model import DistilBertEncoder, DistilBertForMaskedLM
from bert_jax.models.family_spec import Family, table_interop
from bert_jax.models.interop import hf_baseline

FAMILY = Family(
  names.DISTILBERT,
  DistilBertEncoder,
  DistilBertForMaskedLM,
  train_flops=flops.masked_lm_train_flops,
  sentence_head=False,
  hf=table_interop(
    hf_distilbert.MODEL_TYPE,
    "DistilBERT",
    model_config=hf_distilbert.model_config,
    config_json=hf_distilbert.config_json,
    rows=hf_distilbert.rows,
    params_from_hf=hf_distilbert.params_from_hf,
    hf_from_params=hf_distilbert.hf_from_params,
    architecture=hf_distilbert.architecture,
  ),
  hf_baseline=hf_baseline.distilbert_masked_lm,
)
