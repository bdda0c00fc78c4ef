"""One Hugging Face config class's key table, read and written the same way for every family.

A family's interop module declares its ``(bert_jax model key, their key, required)`` rows once,
and the settings of their config class that bert_jax computes one value of (``fixed`` rows:
their key, the value, why no other); `read` turns a ``config.json`` object into model-section
fields (refusing other fixed values, missing required keys and non-integer sizes in one line)
and `write` turns a `ModelConfig` back into their keys, fixed values, ``model_type`` and
``architectures``. What a family checks beyond the table (derived settings) stays in its
module.
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


# The rows Transformer-XL's and XLNet's config classes share (XLNet kept Transformer-XL's key
# names); each family's table adds its own.
RECURRENT_KEYS = (
  ("vocab_size", "vocab_size", True),
  ("hidden_size", "d_model", True),
  ("num_layers", "n_layer", True),
  ("num_heads", "n_head", True),
  ("intermediate_size", "d_inner", True),
  ("hidden_dropout_rate", "dropout", False),
  ("recurrence.mem_len", "mem_len", False),
  ("recurrence.clamp_len", "clamp_len", False),
)


@dataclasses.dataclass(frozen=True)
class ConfigTable:
  """Rows ``(ours, theirs, required)`` of one Hugging Face config class.

  Attributes:
    rows: the key table; optional keys default as their config class and ours both do. A
      dotted key of ours (``recurrence.mem_len``) is a key of a nested model section.
    what: what a config.json of the family is called in messages ("a BERT config.json").
    model_type: their ``model_type``, written by `write`.
    fixed: rows ``(their key, value, why)``: a config.json that sets the key to another value
      is refused ("<source> has <key>=<value>; <why>"); `write` sets it to ``value``.
  """

  rows: tuple
  what: str
  model_type: str = ""
  fixed: tuple = ()

  def check_type(self, values, source: str):
    """Refuses anything but a JSON object of ``model_type`` `model_type`.

    Raises:
      UserInputError: another model type, or not an object.
    """
    if not isinstance(values, dict) or values.get("model_type") != self.model_type:
      raise UserInputError(f"{source} is not {self.what} (model_type {self.model_type!r})")

  def read(self, values: dict, source: str) -> dict:
    """The model-section fields of ``values`` (their keys that are set).

    Raises:
      UserInputError: a fixed setting has another value, a required key is missing or a size
        is not an integer.
    """
    for key, value, why in self.fixed:
      if values.get(key, value) != value:
        raise UserInputError(f"{source} has {key}={values[key]!r}; {why}")
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

  def write(self, config, architecture: str) -> dict:
    """Their keys of ``config`` (a `ModelConfig`), for the ``transformers`` class
    ``architecture``."""
    values = {theirs: _value(config, ours) for ours, theirs, _ in self.rows}
    values.update({key: value for key, value, _ in self.fixed})
    values.update(architectures=[architecture], model_type=self.model_type)
    return values


def _value(config, dotted: str):
  """``config``'s value of a key, dotted through nested sections (``recurrence.mem_len``)."""
  for name in dotted.split("."):
    config = getattr(config, name)
  return config
