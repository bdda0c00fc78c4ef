"""Which language a command runs a model in, for families with language embeddings (XLM)."""

from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.config import ModelConfig


def language_id_of(model: ModelConfig, language: str):
  """The id of ``language`` among the model's languages (`Family.languages`), or None for a
  model without language embeddings.

  Raises:
    UserInputError: a language for a model without languages, an unknown one, or none for a
      model of several.
  """
  family = families.get(model.family)
  if family.languages is None:
    if language:
      raise UserInputError(
        f"--language={language}: model.family={model.family!r} has no language embeddings; "
        "leave --language out"
      )
    return None
  names_ = family.languages(model)
  if not language:
    if len(names_) > 1:
      raise UserInputError(
        f"the model embeds the languages {', '.join(names_)}; pass --language=<one of them>"
      )
    return 0 if names_ else None
  if language not in names_:
    raise UserInputError(
      f"--language={language} is not one of the model's languages ({', '.join(names_) or 'none'})"
    )
  return names_.index(language)
