"""Declaring a config key once: its default and its description live on the dataclass field.

Every settings dataclass (`TrainerConfig`, `ModelConfig`, the data, optimizer and mesh
configs) declares its fields with `option`; `bert_jax.default_config` builds the ConfigDict
from those fields with `config_dict`, so a key's default and meaning exist in exactly one
place, and building a settings dataclass with no arguments gives the config file defaults.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

import ml_collections

from bert_jax.errors import UserInputError

HELP = "help"
# ConfigDict type of a key whose default is None (a placeholder) or whose values may be of
# several types (an int or a tuple, say): the ConfigDict holds a typed FieldReference.
CONFIG_TYPE = "config_type"
# The ConfigDict holds a placeholder so that a preset (model.size) can fill the key.
FROM_PRESET = "from_preset"
# A field that is no key itself but holds sections a registry supplies (`sections_field`).
SECTIONS = "sections"


def option(
  default: Any = dataclasses.MISSING,
  help: str = "",  # pylint: disable=redefined-builtin
  *,
  default_factory: Any = dataclasses.MISSING,
  config_type: type | None = None,
  from_preset: bool = False,
) -> Any:
  """A dataclass field with a default and a one-line description of the config key.

  Args:
    default: the key's default value.
    help: what the key means (one line; `bert-jax config-keys` and docs/configs.md show it).
    default_factory: for defaults that are themselves dataclasses (a nested section).
    config_type: the ConfigDict field type, for keys whose default is None or whose values
      may be of several types (then ``object``).
    from_preset: the ConfigDict leaves the key unset so a preset fills it (``model.size``);
      the dataclass default is the default preset's value.
  """
  if not help:
    raise ValueError("every config key needs a description")
  metadata = {HELP: help, CONFIG_TYPE: config_type, FROM_PRESET: from_preset}
  return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def sections_field(default_factory: Any, help: str) -> Any:  # pylint: disable=redefined-builtin
  """A dataclass field holding named sections that a registry declares, not a config key.

  Its sections' keys are the config's (``<section>.<name>.<key>``); `config_dict`, `defaults`
  and `check_keys` take them as their ``sections`` argument, in the field's place.

  Args:
    default_factory: builds the field's value without sections.
    help: what the sections are (one line).
  """
  metadata = {HELP: help, SECTIONS: True}
  return dataclasses.field(default_factory=default_factory, metadata=metadata)


def _is_sections(field: dataclasses.Field) -> bool:
  return field.metadata.get(SECTIONS, False)


def description(field: dataclasses.Field) -> str:
  """The description a field was declared with ("" if it was declared without `option`)."""
  return field.metadata.get(HELP, "")


def config_dict(cls, sections: Mapping[str, type] | None = None) -> ml_collections.ConfigDict:
  """The ConfigDict section of a settings dataclass: one key per field, at its default.

  Nested dataclass fields (declared with ``default_factory=<dataclass>``) become nested
  sections. Every field must have been declared with `option` (or `sections_field`).

  Args:
    cls: a settings dataclass type.
    sections: name -> options dataclass of the sections its `sections_field` holds.

  Raises:
    ValueError: a field has no description (it was not declared with `option`).
  """
  section = ml_collections.ConfigDict()
  for field in dataclasses.fields(cls):
    if not description(field):
      raise ValueError(f"{cls.__name__}.{field.name} is not declared with config_fields.option")
    if _is_sections(field):
      for name, options in (sections or {}).items():
        section[name] = config_dict(options)
      continue
    if dataclasses.is_dataclass(field.default_factory):
      section[field.name] = config_dict(field.default_factory)
      continue
    value = field.default
    config_type = field.metadata[CONFIG_TYPE]
    if field.metadata[FROM_PRESET]:
      value = ml_collections.config_dict.placeholder(type(field.default))
    elif config_type is not None:
      value = ml_collections.FieldReference(value, field_type=config_type)
    section[field.name] = value
  return section


def defaults(cls, sections: Mapping[str, type] | None = None) -> dict:
  """``{key: default}`` of a settings dataclass, nested sections as nested dicts (``sections``:
  those of its `sections_field`, as in `config_dict`)."""
  out = {}
  for field in dataclasses.fields(cls):
    if _is_sections(field):
      out.update({name: defaults(options) for name, options in (sections or {}).items()})
    elif dataclasses.is_dataclass(field.default_factory):
      out[field.name] = defaults(field.default_factory)
    else:
      out[field.name] = field.default
  return out


def check_keys(cls, values: Mapping[str, Any], section: str, sections=()):
  """Refuses keys that are not fields of ``cls`` (nor names in ``sections``).

  Args:
    cls: the settings dataclass type.
    values: the section's keys and values.
    section: the section's name in the message ("data", "model.xlm", "top-level").
    sections: the section names its `sections_field` holds.

  Raises:
    UserInputError: an unknown key (one line listing the valid keys).
  """
  known = {f.name for f in dataclasses.fields(cls) if not _is_sections(f)} | set(sections)
  unknown = sorted(set(values) - known)
  if unknown:
    raise UserInputError(f"unknown {section} config keys {unknown}; valid keys: {sorted(known)}")


def from_section(cls, values: Mapping[str, Any], section: str):
  """A settings dataclass built from its config section's keys.

  Args:
    cls: the settings dataclass type.
    values: the section's keys and values.
    section: the section's name in the message ("data", "model.xlm", "top-level").

  Raises:
    UserInputError: a key is not a field of ``cls`` (one line listing the valid keys).
  """
  check_keys(cls, values, section)
  return cls(**values)
