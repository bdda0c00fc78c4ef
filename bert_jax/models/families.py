"""The one registry of model families: ``model.family`` -> its `family_spec.Family`.

Everything above the models layer asks this registry (and the `Family` it returns) instead of
testing a family's name or importing a family's modules; `tests/test_architecture.py`
enforces that. A family adds:

  1. its modules under ``models/`` built from the shared blocks (`embeddings`, `attention`,
     `feed_forward`, `blocks`, `encoder`, `heads`): an encoder (``(ids, types, mask) ->
     (sequence, pooled)``) and a pretraining model whose trunk is that encoder under the
     scope ``bert``;
  2. its name in `bert_jax.names` (``names.FAMILIES``) and its config keys on `ModelConfig`
     (`models/config.py`; family-only ones as an options section like ``model.electra``);
  3. one `family_spec.Family` entry in ``_FAMILIES`` below, filling what differs from the
     defaults: ``train_flops`` (`models/flops.py` formulas), ``pretraining_objective`` (one of
     `family_spec.OBJECTIVES`; a new objective also adds its task to
     `tasks/registry.PRETRAINING_OBJECTIVES`), ``sentence_head``, ``causal_lm_model``,
     ``plain_examples`` / ``hidden_state_modules`` (`tools/embed`), ``hf`` (its Hugging Face
     conversion: `family_spec.table_interop` over its config-key table and weight rows, both
     directions), ``hf_baseline`` (transformers' Flax model trained the same way);
  4. its tests, configs (``configs/<family>_*.py``) and README rows.

No trainer, task or tool module changes.
"""

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models import electra, flops
from bert_jax.models.albert import AlbertEncoder, AlbertForPreTraining
from bert_jax.models.bert import BertEncoder, BertForPreTraining
from bert_jax.models.blocks import FeedForwardSublayer
from bert_jax.models.distilbert import DistilBertEncoder, DistilBertForMaskedLM
from bert_jax.models.family_spec import (
  PERMUTATION_LM,
  REPLACED_TOKEN_DETECTION,
  Family,
  HfInterop,
  table_interop,
)
from bert_jax.models.interop import (
  albert_config,
  albert_weights,
  hf_baseline,
  hf_baseline_electra,
  hf_config,
  hf_distilbert,
  hf_electra,
  hf_weights,
  transformer_xl_weights,
  xlnet_weights,
)
from bert_jax.models.transformer_xl import TransformerXLEncoder, TransformerXLLMHeadModel
from bert_jax.models.xlnet import XLNetEncoder, XLNetForPreTraining, XLNetLMHeadModel


def _bert_architecture(params) -> str:
  if "mlm_head" in params:
    return "BertForPreTraining" if "nsp_head" in params else "BertForMaskedLM"
  return "BertModel"


_FAMILIES = {
  names.BERT: Family(
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
      params_from_hf=hf_weights.params_from_hf,
      hf_from_params=hf_weights.hf_from_params,
      architecture=_bert_architecture,
    ),
    hf_baseline=hf_baseline.bert_pretraining,
  ),
  names.ALBERT: Family(
    names.ALBERT,
    AlbertEncoder,
    AlbertForPreTraining,
    train_flops=flops.factorised_masked_lm_train_flops,
    hidden_state_modules=(FeedForwardSublayer,),  # Partly shared stacks end a layer with it.
    hf=table_interop(
      "albert",
      "ALBERT",
      model_config=albert_config.model_config_from_albert_config,
      config_json=albert_config.albert_config_from_model_config,
      rows=albert_weights.rows,
      params_from_hf=albert_weights.params_from_hf,
      hf_from_params=albert_weights.hf_from_params,
      architecture=albert_weights.architecture,
    ),
    hf_baseline=hf_baseline.albert_pretraining,
  ),
  names.DISTILBERT: Family(
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
  ),
  names.ELECTRA: Family(
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
    ),
    hf_baseline=hf_baseline_electra.electra_pretraining,
  ),
  names.XLNET: Family(
    names.XLNET,
    XLNetEncoder,
    XLNetForPreTraining,
    train_flops=flops.masked_lm_train_flops,
    pretraining_objective=PERMUTATION_LM,
    sentence_head=False,
    causal_lm_model=XLNetLMHeadModel,
    hf=table_interop(
      "xlnet",
      "XLNet",
      model_config=xlnet_weights.model_config_from_xlnet_config,
      config_json=xlnet_weights.xlnet_config_from_model_config,
      rows=xlnet_weights.rows,
      params_from_hf=xlnet_weights.params_from_hf,
      hf_from_params=xlnet_weights.hf_from_params,
      architecture=xlnet_weights.architecture,
    ),
  ),
  # Pretrains as a causal LM with memory (data.objective='clm') only, not on masked positions.
  names.TRANSFORMER_XL: Family(
    names.TRANSFORMER_XL,
    TransformerXLEncoder,
    TransformerXLLMHeadModel,
    train_flops=flops.masked_lm_train_flops,
    pretraining_objective="",
    sentence_head=False,
    causal_lm_model=TransformerXLLMHeadModel,
    plain_examples=True,
    hf=table_interop(
      transformer_xl_weights.MODEL_TYPE,
      "Transformer-XL",
      model_config=transformer_xl_weights.model_config,
      config_json=transformer_xl_weights.config_json,
      rows=transformer_xl_weights.rows,
      params_from_hf=transformer_xl_weights.params_from_hf,
      hf_from_params=transformer_xl_weights.hf_from_params,
      architecture=transformer_xl_weights.architecture,
    ),
  ),
}


def get(name: str) -> Family:
  """The registered family called ``name``.

  Raises:
    UserInputError: no family has that name.
  """
  if name not in _FAMILIES:
    raise UserInputError(
      f"model.family={name!r} is unknown; choose one of {', '.join(names.FAMILIES)}"
    )
  return _FAMILIES[name]


def registered() -> tuple[str, ...]:
  """Names of the registered families, in registration order."""
  return tuple(_FAMILIES)


def _hf_choices() -> str:
  # Short labels: the whole line must stay readable (the error boundary cuts at 299 characters).
  return ", ".join(f"{f.hf.label} ({f.hf.model_type!r})" for f in _FAMILIES.values() if f.hf)


def for_config_json(values, source: str) -> Family:
  """The family of a Hugging Face ``config.json`` object (no ``model_type`` reads as BERT).

  Raises:
    UserInputError: not a JSON object, or a model type no family converts.
  """
  if not isinstance(values, dict):
    raise UserInputError(f"{source} is not a JSON object; pass a Hugging Face config.json")
  model_type = values.get("model_type", _FAMILIES[names.BERT].hf.model_type)
  for family in _FAMILIES.values():
    if family.hf and family.hf.model_type == model_type:
      return family
  raise UserInputError(
    f"{source} describes a {model_type!r} model; convert handles {_hf_choices()}"
  )


def hf_interop(family: str, source: str) -> HfInterop:
  """The Hugging Face conversion a workdir of ``model.family=family`` exports with.

  Raises:
    UserInputError: the family has no Hugging Face conversion.
  """
  interop = get(family).hf
  if interop is None:
    raise UserInputError(
      f"{source} holds a model.family={family!r} model; --to=hf exports {_hf_choices()}"
    )
  return interop
