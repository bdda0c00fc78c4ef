"""The electra family's `family_spec.Family` record (registered in `models/families.py`)."""

from bert_jax import names
from bert_jax.models.electra import hf as hf_electra
from bert_jax.models.electra import model as electra
from bert_jax.models.electra import options
from bert_jax.models.family_spec import REPLACED_TOKEN_DETECTION, Family, HfInterop

FAMILY = Family(
  names.ELECTRA,
  electra.ElectraEncoder,
  electra.ElectraForPreTraining,
  train_flops=electra.train_flops,
  pretraining_objective=REPLACED_TOKEN_DETECTION,
  sentence_head=False,
  # Two Hugging Face directories: the discriminator and (--generator) its generator.
  hf=HfInterop(
    "electra",
    "ELECTRA",
    hf_electra.read_model_config,
    hf_electra.read_params,
    hf_electra.write,
    pair="generator",
    read_alone=hf_electra.read_alone,  # A generator alone (ElectraForMaskedLM).
  ),
  sections=options.SECTIONS,
)
