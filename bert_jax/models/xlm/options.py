"""XLM's options (``model.xlm``): the languages of its language embeddings and its positions."""

import dataclasses

from bert_jax.config_fields import option
from bert_jax.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class XlmOptions:
  """Options of ``model.family='xlm'`` (ignored by other families)."""

  languages: tuple[str, ...] = option(
    (),
    help="xlm: language names in id order (Hugging Face's lang2id); one language embedding "
    "row each, none for fewer than two.",
  )
  use_lang_emb: bool = option(
    True, help="xlm: add a language embedding to each token (needs two or more languages)."
  )
  language: str = option(
    "",
    help="xlm: the language (one of languages) whose embedding every token gets where no "
    "language ids are passed, as in fine-tuning; '' = the first.",
  )
  sinusoidal_embeddings: bool = option(
    False, help="xlm: fixed sinusoidal position table (not trained) instead of a learned one."
  )

  def __post_init__(self):
    languages = self.languages
    object.__setattr__(
      self, "languages", (languages,) if isinstance(languages, str) else tuple(languages)
    )
    if len(set(self.languages)) != len(self.languages) or not all(
      isinstance(name, str) and name for name in self.languages
    ):
      raise UserInputError(
        f"model.xlm.languages={self.languages!r} must be distinct non-empty names, e.g. "
        "('en', 'fr')"
      )
    if self.language and self.language not in self.languages:
      raise UserInputError(
        f"model.xlm.language={self.language!r} is not one of model.xlm.languages="
        f"{self.languages}; pick one of them or leave it empty"
      )

  @property
  def n_langs(self) -> int:
    """Hugging Face's ``n_langs`` (1 when no languages are named)."""
    return max(1, len(self.languages))

  @property
  def has_language_embeddings(self) -> bool:
    """Whether the model holds a language table (transformers: n_langs > 1 and use_lang_emb)."""
    return self.use_lang_emb and self.n_langs > 1

  @property
  def default_language_id(self) -> int:
    """The id of ``language`` (0 when it is empty)."""
    return self.language_id(self.language) if self.language else 0

  def language_id(self, name: str) -> int:
    """The id of language ``name``.

    Raises:
      UserInputError: the language is not one of ``languages``.
    """
    if name not in self.languages:
      raise UserInputError(
        f"language {name!r} is not one of model.xlm.languages={self.languages}; add it there"
      )
    return self.languages.index(name)


# The config section(s) of family xlm (`family_spec.Family.sections`).
SECTIONS = {"xlm": XlmOptions}
