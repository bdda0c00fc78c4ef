"""The family-only sections of a model config (``model.electra``, ``model.adaptive``, ...).

A family package declares its sections on its `family_spec.Family` record; the registry
(`models/families.py`) assembles every family's into one `FamilySections` that `ModelConfig`
holds, so `models/config.py` declares no family's keys and imports no family package.
"""

from collections.abc import Callable, Iterator, Mapping
from typing import Any


def _is_default(options) -> bool:
  return options == type(options)()


class FamilySections(Mapping):
  """Section name -> frozen options instance, plus the registry's per-family model check.

  Immutable and hashable (a `ModelConfig` is a static jit argument). Two of them are equal when
  their sections that differ from their defaults are: a section left out means its defaults,
  as `models.config.model_config_from_dict` builds it, so a config built without the registry
  equals the registry's when neither sets a family-only key.
  """

  def __init__(self, sections: Mapping[str, Any] = (), family_check: Callable | None = None):
    """Holds ``sections`` and ``family_check``.

    Args:
      sections: name -> options instance (a frozen dataclass whose defaults build with no
        arguments).
      family_check: ``ModelConfig -> None``, raising `UserInputError` where the config's
        family cannot compute it; None: no family checks.
    """
    self._sections = dict(sections)
    self._family_check = family_check
    # What equality and the hash compare, computed once: the mapping never changes, and a
    # `ModelConfig` is hashed whenever jax or flax looks it up as a static argument.
    self._non_default = frozenset(
      (name, options) for name, options in self._sections.items() if not _is_default(options)
    )

  def __getitem__(self, name: str):
    return self._sections[name]

  def __iter__(self) -> Iterator[str]:
    return iter(self._sections)

  def __len__(self) -> int:
    return len(self._sections)

  def __eq__(self, other) -> bool:
    return isinstance(other, FamilySections) and self._non_default == other._non_default

  def __hash__(self) -> int:
    return hash(self._non_default)

  def __repr__(self) -> str:
    return f"FamilySections({self._sections!r})"

  def replace(self, **changes) -> "FamilySections":
    """The same sections (and check) with ``changes`` (name -> options) set or added."""
    return FamilySections({**self._sections, **changes}, self._family_check)

  def with_defaults(self, classes: Mapping[str, type], family_check: Callable | None):
    """Every section of ``classes`` (those held kept, the others at their defaults), in their
    order, checked by ``family_check``."""
    sections = {
      name: self._sections[name] if name in self else cls() for name, cls in classes.items()
    }
    return FamilySections({**sections, **self._sections}, family_check)

  def check_model(self, config):
    """Each section against the rest of ``config`` (a `ModelConfig`), then its family's check.

    Raises:
      UserInputError: a section's or the family's check refuses the config.
    """
    for options in self._sections.values():
      check = getattr(options, "check_model", None)
      if check is not None:
        check(config)
    if self._family_check is not None:
      self._family_check(config)
