"""The transformer_xl family's `family_spec.Family` record (registered in `models/families.py`)."""

from bert_jax import names
from bert_jax.models import flops
from bert_jax.models.family_spec import Family, module_interop
from bert_jax.models.recurrence_options import check_own_layers
from bert_jax.models.transformer_xl import adaptive_config
from bert_jax.models.transformer_xl import hf as transformer_xl_weights
from bert_jax.models.transformer_xl.model import TransformerXLEncoder, TransformerXLLMHeadModel

# Pretrains as a causal LM with memory (data.objective='clm') only, not on masked positions.
FAMILY = Family(
  names.TRANSFORMER_XL,
  TransformerXLEncoder,
  TransformerXLLMHeadModel,
  train_flops=flops.masked_lm_train_flops,
  pretraining_objective="",
  sentence_head=False,
  causal_lm_model=TransformerXLLMHeadModel,
  plain_examples=True,
  hf=module_interop("Transformer-XL", transformer_xl_weights),
  sections=adaptive_config.SECTIONS,
  check_config=check_own_layers,
)
