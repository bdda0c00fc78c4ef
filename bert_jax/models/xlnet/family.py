"""The xlnet family's `family_spec.Family` record (registered in `models/families.py`)."""

from bert_jax import names
from bert_jax.models import flops
from bert_jax.models.family_spec import PERMUTATION_LM, Family, module_interop
from bert_jax.models.recurrence_options import check_own_layers
from bert_jax.models.xlnet import hf as xlnet_weights
from bert_jax.models.xlnet.model import XLNetEncoder, XLNetForPreTraining, XLNetLMHeadModel

FAMILY = Family(
  names.XLNET,
  XLNetEncoder,
  XLNetForPreTraining,
  train_flops=flops.masked_lm_train_flops,
  pretraining_objective=PERMUTATION_LM,
  sentence_head=False,
  causal_lm_model=XLNetLMHeadModel,
  hf=module_interop("XLNet", xlnet_weights),
  check_config=check_own_layers,
)
