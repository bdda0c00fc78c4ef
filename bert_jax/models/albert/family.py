"""The albert family's `family_spec.Family` record (registered in `models/families.py`)."""

from bert_jax import names
from bert_jax.models import flops
from bert_jax.models.albert import hf_config as albert_config
from bert_jax.models.albert import hf_weights as albert_weights
from bert_jax.models.albert import options
from bert_jax.models.albert.model import AlbertEncoder, AlbertForPreTraining
from bert_jax.models.blocks import FeedForwardSublayer
from bert_jax.models.family_spec import Family, module_interop

FAMILY = Family(
  names.ALBERT,
  AlbertEncoder,
  AlbertForPreTraining,
  train_flops=flops.factorised_masked_lm_train_flops,
  hidden_state_modules=(FeedForwardSublayer,),  # Partly shared stacks end a layer with it.
  hf=module_interop("ALBERT", albert_config, albert_weights),
  sections=options.SECTIONS,
)
