"""The bert family's `family_spec.Family` record (registered in `models/families.py`)."""

from bert_jax import names
from bert_jax.models import flops
from bert_jax.models.bert import hf as bert_hf
from bert_jax.models.bert.model import BertEncoder, BertForPreTraining
from bert_jax.models.family_spec import Family, table_interop
from bert_jax.models.interop import hf_config, hf_weights


def _bert_architecture(params) -> str:
  if "mlm_head" in params:
    return "BertForPreTraining" if "nsp_head" in params else "BertForMaskedLM"
  return "BertModel"


FAMILY = Family(
  names.BERT,
  BertEncoder,
  BertForPreTraining,
  train_flops=flops.masked_lm_train_flops,
  hf=table_interop(
    "bert",
    "BERT",
    model_config=hf_config.model_config_from_bert_config,
    config_json=hf_config.bert_config_from_model_config,
    rows=hf_weights.rows,
    params_from_hf=bert_hf.params_from_hf,
    hf_from_params=bert_hf.hf_from_params,
    architecture=_bert_architecture,
  ),
)
