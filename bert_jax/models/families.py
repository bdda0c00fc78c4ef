"""The one registry of model families: ``model.family`` -> its `family_spec.Family`.

Everything outside a family's package asks this registry (and the `Family` it returns)
instead of testing a family's name or importing the family's modules;
`tests/test_architecture.py` enforces that. A new family ``<f>`` provides:

  1. a package ``bert_jax/models/<f>/``: ``__init__.py`` (a docstring only, so importing one
     module of the package does not import all of it), its modules built from the shared
     blocks (`embeddings`, `attention/`, `feed_forward`, `blocks`, `encoder`, `heads`,
     `mlm_trunk`, `recurrence`) changing only what differs: an encoder called on ``(ids, types, mask)``
     returning ``(sequence, pooled)``, and a pretraining model whose trunk is that encoder
     under the scope ``bert`` (so fine-tuning restores it by that name);
  2. its Hugging Face interop in the package (e.g. ``<f>/hf.py``): the config-key rows as an
     `interop.config_table.ConfigTable` (shared read/write both ways: fixed settings,
     ``model_type``, missing-key and integer checks; ``interop.hf_config.KEYS`` are BERT's
     rows to extend, ``config_table.RECURRENT_KEYS`` Transformer-XL's), the weight rows over
     `interop.weight_table` (``named_rows`` for embeddings and MLM heads,
     ``hf_weights.layer_rows`` for BERT-layout layers, `interop.hf_state.HfState` for prefixed
     and tied state dicts), and the ``MODEL_TYPE`` / ``model_config`` / ``config_json`` /
     ``rows`` / ``params_from_hf`` / ``hf_from_params`` / ``architecture`` names;
  3. ``<f>/family.py`` defining ``FAMILY = family_spec.Family(...)``: ``name``, ``encoder``,
     ``pretraining_model``, ``train_flops`` (a `models/flops.py` formula or its own),
     and what differs from the defaults: ``pretraining_objective`` (one of
     `family_spec.OBJECTIVES`; a new objective also adds its task to
     ``tasks/registry.PRETRAINING_OBJECTIVES``), ``sentence_head``, ``causal_lm_model``,
     ``plain_examples`` / ``hidden_state_modules`` (`tools/embed`), ``hf``
     (`family_spec.module_interop(label, <f>.hf)`, or `family_spec.table_interop` naming the
     functions one by one);
  4. one import and one entry in ``_FAMILIES`` below; its name in `bert_jax.names`
     (``names.FAMILIES``) and in ``tests/test_architecture._FAMILY_CONSTANTS``; its
     family-only model keys as a section on its record (``sections={"electra":
     ElectraOptions}`` is ``model.electra``: a frozen dataclass in the package declared with
     `config_fields.option`, whose ``check_model(config)`` raises a one-line `UserInputError`
     for model keys the family cannot compute), and ``check_config`` for shared keys it
     cannot compute; shared keys on `ModelConfig` (`models/config.py`);
  5. its tests, ``configs/<f>_*.py`` and README rows ("Model families").

No trainer, task, data or tool module changes.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models import config as config_lib
from bert_jax.models.albert.family import FAMILY as ALBERT
from bert_jax.models.bert.family import FAMILY as BERT
from bert_jax.models.distilbert.family import FAMILY as DISTILBERT
from bert_jax.models.electra.family import FAMILY as ELECTRA
from bert_jax.models.family_spec import Family, HfInterop
from bert_jax.models.roberta.family import FAMILY as ROBERTA
from bert_jax.models.transformer_xl.family import FAMILY as TRANSFORMER_XL
from bert_jax.models.xlm.family import FAMILY as XLM
from bert_jax.models.xlm_roberta.family import FAMILY as XLM_ROBERTA
from bert_jax.models.xlnet.family import FAMILY as XLNET

_FAMILIES = {
  f.name: f
  for f in (BERT, ALBERT, DISTILBERT, ELECTRA, XLNET, TRANSFORMER_XL, ROBERTA, XLM_ROBERTA, XLM)
}


def _sections() -> dict[str, type]:
  sections = {}
  for family in _FAMILIES.values():
    for name, options in family.sections.items():
      if sections.setdefault(name, options) is not options:
        raise ValueError(f"two families declare model.{name} with different classes")
  return sections


# Every family's own config sections: name -> options dataclass, in registration order.
SECTIONS = _sections()


def _check_family(model: config_lib.ModelConfig):
  check = _FAMILIES[model.family].check_config
  if check is not None:
    check(model)


def model_config_from_dict(model_dict: Mapping[str, Any]) -> config_lib.ModelConfig:
  """`config.model_config_from_dict` with every family's sections and checks: the config's
  ``model`` section (or a run's stored one, `config.stored_model_section`) as a `ModelConfig`.

  Raises:
    UserInputError: an unknown key or a value the model cannot take (one line).
  """
  return config_lib.model_config_from_dict(model_dict, SECTIONS, _check_family)


def complete(model: config_lib.ModelConfig) -> config_lib.ModelConfig:
  """``model`` holding every family's sections (its own kept, the others at their defaults) and
  its family's checks, as `model_config_from_dict` builds it: what a family's Hugging Face
  reader builds with its own sections only, ready to be stored (`ModelConfig.to_dict`)."""
  sections = model.family_sections.with_defaults(SECTIONS, _check_family)
  return dataclasses.replace(model, family_sections=sections)


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
  # The model types alone: the whole line must stay readable (the error boundary cuts at 299
  # characters, and the source path comes first).
  return "model_type " + ", ".join(f.hf.model_type for f in _FAMILIES.values() if f.hf)


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
