"""One Hugging Face config class's key table, read and written the same way for every family.

A family's interop module declares its ``(bert_jax model key, their key, required)`` rows once;
`read` turns a ``config.json`` object into model-section fields (refusing missing required
keys and non-integer sizes in one line) and `write` turns a `ModelConfig` back into their keys.
What a family checks beyond the table (activations, fixed settings) stays in its module.
"""

import dataclasses

from bert_jax.errors import UserInputError

# Model keys that are sizes: a config.json must give them as integers.
_INT_KEYS = (
  "vocab_size",
  "embedding_size",
  "hidden_size",
  "num_layers",
  "num_heads",
  "intermediate_size",
  "max_position_embeddings",
  "type_vocab_size",
)


@dataclasses.dataclass(frozen=True)
class ConfigTable:
  """Rows ``(ours, theirs, required)`` of one Hugging Face config class.

  Attributes:
    rows: the key table; optional keys default as their config class and ours both do. A
      dotted key of ours (``recurrence.mem_len``) is a key of a nested model section.
    what: what a config.json of the family is called in messages ("a BERT config.json").
  """

  rows: tuple
  what: str

  def read(self, values: dict, source: str) -> dict:
    """The model-section fields of ``values`` (their keys that are set).

    Raises:
      UserInputError: a required key is missing or a size is not an integer.
    """
    missing = [theirs for _, theirs, required in self.rows if required and theirs not in values]
    if missing:
      raise UserInputError(f"{source} lacks {', '.join(missing)}; is it {self.what}?")
    fields = {}
    for ours, theirs, _ in self.rows:
      if values.get(theirs) is not None:
        *sections, key = ours.split(".")
        section = fields
        for name in sections:
          section = section.setdefault(name, {})
        section[key] = values[theirs]
    for key in _INT_KEYS:
      if key in fields and (not isinstance(fields[key], int) or isinstance(fields[key], bool)):
        raise UserInputError(f"{source}: {key}={fields[key]!r} must be an integer")
    return fields

  def write(self, config) -> dict:
    """Their keys of ``config`` (a `ModelConfig`)."""
    return {theirs: _value(config, ours) for ours, theirs, _ in self.rows}


def _value(config, dotted: str):
  """``config``'s value of a key, dotted through nested sections (``recurrence.mem_len``)."""
  for name in dotted.split("."):
    config = getattr(config, name)
  return config
