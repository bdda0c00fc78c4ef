"""Declaring a config key once: its default and its description live on the dataclass field.

Every settings dataclass (`TrainerConfig`, `ModelConfig`, the data, optimizer and mesh
configs) declares its fields with `option`; `bert_jax.default_config` builds the ConfigDict
from those fields, so a key's default and meaning exist in exactly one place.
"""

import dataclasses
from typing import Any

HELP = "help"


def option(
  default: Any = dataclasses.MISSING,
  help: str = "",
  *,  # pylint: disable=redefined-builtin
  default_factory: Any = dataclasses.MISSING,
) -> Any:
  """A dataclass field with a default and a one-line description of the config key.

  Args:
    default: the key's default value.
    help: what the key means (shown by ``default_config.describe``).
    default_factory: for defaults that are themselves dataclasses.
  """
  if not help:
    raise ValueError("every config key needs a description")
  return dataclasses.field(default=default, default_factory=default_factory, metadata={HELP: help})


def description(field: dataclasses.Field) -> str:
  """The description a field was declared with ("" if it was declared without `option`)."""
  return field.metadata.get(HELP, "")
