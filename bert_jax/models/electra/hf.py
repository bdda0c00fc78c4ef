"""Hugging Face ELECTRA (``ElectraForPreTraining`` + ``ElectraForMaskedLM``) <-> bert_jax params.

Hugging Face keeps the discriminator and the generator as two models in two directories, each
with its own copy of the embeddings; bert_jax's ELECTRA (`models/electra/model.py`) is one params
tree in which the generator reads the discriminator's embeddings. Both state dicts go into one
table here: the discriminator's names as they are, the generator's behind `GENERATOR_PREFIX`.
The generator's embeddings must equal the discriminator's (they were trained shared); they are
checked and then dropped on import, and written into both directories on export.

``ElectraModel`` checkpoints (the discriminator trunk without the ``electra.`` prefix or a
head) also load, as in `hf_weights` for BERT; so does a discriminator without a generator.
A generator alone (``ElectraForMaskedLM``, the published electra-*-generator checkpoints)
becomes a ``model.electra.lone_generator`` model: its trunk under ``bert``, its head under
``generator_head``, at its own sizes (`lone_generator_rows`).
"""

import dataclasses

import numpy as np

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig
from bert_jax.models.electra.model import ElectraForPreTraining
from bert_jax.models.electra.options import ElectraOptions, generator_config
from bert_jax.models.interop import hf_config, hf_weights, weight_table
from bert_jax.models.interop.weight_table import Row

GENERATOR_PREFIX = "generator::"
_PREFIX = "electra."
_TRUNK_PARTS = ("embeddings.", "embeddings_project.", "encoder.")  # ElectraModel names.
_EMBEDDING_TABLES = (
  ("word_embeddings/embedding", "embeddings.word_embeddings.weight"),
  ("position_embeddings/embedding", "embeddings.position_embeddings.weight"),
  ("token_type_embeddings/embedding", "embeddings.token_type_embeddings.weight"),
  ("layer_norm/scale", "embeddings.LayerNorm.weight"),
  ("layer_norm/bias", "embeddings.LayerNorm.bias"),
)
# The generator's MLM decoder is tied to its word table; .bin files repeat it.
_TIED_DECODER = "generator_lm_head.weight"
_IGNORED = ("electra.embeddings.position_ids",)
# (bert_jax suffix, Hugging Face name, transposed) of the heads.
_DISCRIMINATOR_HEAD = (
  ("dense/kernel", "dense.weight", True),
  ("dense/bias", "dense.bias", False),
  ("prediction/kernel", "dense_prediction.weight", True),
  ("prediction/bias", "dense_prediction.bias", False),
)
_GENERATOR_HEAD = (
  ("dense/kernel", "generator_predictions.dense.weight", True),
  ("dense/bias", "generator_predictions.dense.bias", False),
  ("layer_norm/scale", "generator_predictions.LayerNorm.weight", False),
  ("layer_norm/bias", "generator_predictions.LayerNorm.bias", False),
  ("output_bias", "generator_lm_head.bias", False),
)
DISCRIMINATOR_ARCHITECTURE = "ElectraForPreTraining"
GENERATOR_ARCHITECTURE = "ElectraForMaskedLM"


def _encoder_rows(ours: str, theirs: str, config: ModelConfig, group: str):
  """Rows of ``embeddings_project`` (when the embedding width differs) and the layers."""
  rows = []
  if (config.embedding_size or config.hidden_size) != config.hidden_size:
    rows += [
      Row(
        f"{ours}/embeddings_project/kernel", f"{theirs}embeddings_project.weight", group, None, True
      ),
      Row(f"{ours}/embeddings_project/bias", f"{theirs}embeddings_project.bias", group),
    ]
  return rows + hf_weights.layer_rows(
    f"{ours}/encoder", f"{theirs}encoder.layer", config.num_layers, group
  )


def _embedding_rows():
  return [
    Row(f"bert/embeddings/{ours}", _PREFIX + theirs, weight_table.REQUIRED_GROUP)
    for ours, theirs in _EMBEDDING_TABLES
  ]


def _generator_head_rows(prefix: str):
  return [
    Row(f"generator_head/{ours}", f"{prefix}{theirs}", "generator", None, t)
    for ours, theirs, t in _GENERATOR_HEAD
  ]


def rows(config: ModelConfig):
  """The `Row` table of ``config``: an ELECTRA pair (generator names prefixed), or
  `lone_generator_rows` for a lone generator."""
  if config.electra.lone_generator:
    return lone_generator_rows(config)
  gen = generator_config(config)
  g = GENERATOR_PREFIX
  embeddings = _embedding_rows()
  discriminator_head = [
    Row(f"discriminator_head/{ours}", f"discriminator_predictions.{theirs}", "disc_head", None, t)
    for ours, theirs, t in _DISCRIMINATOR_HEAD
  ]
  return (
    embeddings
    + _encoder_rows("bert", _PREFIX, config, weight_table.REQUIRED_GROUP)
    + discriminator_head
    + _encoder_rows("generator", g + _PREFIX, gen, "generator")
    + _generator_head_rows(g)
  )


def lone_generator_rows(config: ModelConfig):
  """The `Row` table of an ``ElectraForMaskedLM`` as a lone-generator model: the trunk under
  ``bert`` (its names as in ``ElectraModel``), the MLM head under ``generator_head``."""
  return (
    _embedding_rows()
    + _encoder_rows("bert", _PREFIX, config, weight_table.REQUIRED_GROUP)
    + _generator_head_rows("")
  )


def _canonical(name: str) -> str:
  return _PREFIX + name if name.startswith(_TRUNK_PARTS) else name


def params_from_hf(discriminator, generator, config: ModelConfig, source: str):
  """Builds bert_jax ELECTRA params (unscanned) from Hugging Face state dicts.

  Args:
    discriminator: name -> array of an ``ElectraForPreTraining`` (or ``ElectraModel``).
    generator: name -> array of the matching ``ElectraForMaskedLM``, or None.
    config: the bert_jax model (family electra) both must fit.
    source: the checkpoint paths, for error messages.

  Returns:
    Nested numpy params: ``bert``, plus ``discriminator_head`` and ``generator`` /
    ``generator_head`` when the checkpoints have them.

  Raises:
    UserInputError: tensors missing, unexpected or mis-shaped (one message), or a generator
      whose embeddings are not the discriminator's.
  """
  tensors = {_canonical(name): value for name, value in discriminator.items()}
  ignored = set(_IGNORED)
  if generator is not None:
    generator = {_canonical(name): value for name, value in generator.items()}
    for _, theirs in _EMBEDDING_TABLES:
      name = _PREFIX + theirs
      mine, its = tensors.get(name), generator.get(name)
      if mine is not None and its is not None and not np.array_equal(mine, its):
        raise UserInputError(
          f"{source}: the generator's {name} differs from the discriminator's; convert a "
          "generator and discriminator trained together (they share the embeddings)"
        )
    if _TIED_DECODER in generator and not np.array_equal(
      generator[_TIED_DECODER], generator.get(_PREFIX + _EMBEDDING_TABLES[0][1])
    ):
      raise UserInputError(
        f"{source}: {_TIED_DECODER} differs from the word embeddings; untied decoders are "
        "not supported"
      )
    tensors.update({GENERATOR_PREFIX + name: value for name, value in generator.items()})
    ignored |= {GENERATOR_PREFIX + _PREFIX + theirs for _, theirs in _EMBEDDING_TABLES}
    ignored |= {GENERATOR_PREFIX + name for name in (_TIED_DECODER, *_IGNORED)}
  return weight_table.import_state(
    rows(config),
    tensors,
    config,
    source=source,
    ignored=frozenset(ignored),
    our_shapes=weight_table.param_shapes(ElectraForPreTraining, config),
  )


def is_generator_state(state) -> bool:
  """Whether a Hugging Face state dict is an ``ElectraForMaskedLM``'s (it has the MLM head)."""
  return any(name.startswith("generator_predictions.") for name in state)


def lone_generator_params_from_hf(state, config: ModelConfig, source: str):
  """bert_jax params (``bert``, ``generator_head``) of an ``ElectraForMaskedLM`` state dict.

  Raises:
    UserInputError: tensors missing, unexpected or mis-shaped (one message), or a decoder
      that is not tied to the word embeddings.
  """
  tensors = {_canonical(name): value for name, value in state.items()}
  if _TIED_DECODER in tensors and not np.array_equal(
    tensors[_TIED_DECODER], tensors.get(_PREFIX + _EMBEDDING_TABLES[0][1])
  ):
    raise UserInputError(
      f"{source}: {_TIED_DECODER} differs from the word embeddings; untied decoders are "
      "not supported"
    )
  return weight_table.import_state(
    lone_generator_rows(config),
    tensors,
    config,
    source=source,
    ignored=frozenset((_TIED_DECODER, *_IGNORED)),
    our_shapes=weight_table.param_shapes(ElectraForPreTraining, config),
  )


def hf_from_params(params, config: ModelConfig):
  """The inverse of `params_from_hf`: (discriminator state, generator state or None).

  Names are those ``save_pretrained`` writes (the generator's tied decoder left out); the
  generator's state repeats the shared embeddings, as Hugging Face's ``ElectraForMaskedLM``
  holds its own copy. A lone generator exports as (None, its ``ElectraForMaskedLM`` state).
  """
  state = weight_table.export_params(rows(config), params)
  if config.electra.lone_generator:
    return None, state
  discriminator = {k: v for k, v in state.items() if not k.startswith(GENERATOR_PREFIX)}
  generator = {
    k[len(GENERATOR_PREFIX) :]: v for k, v in state.items() if k.startswith(GENERATOR_PREFIX)
  }
  if not generator:
    return discriminator, None
  for _, theirs in _EMBEDDING_TABLES:
    generator[_PREFIX + theirs] = discriminator[_PREFIX + theirs]
  return discriminator, generator


def model_config_from_hf(discriminator: dict, generator: dict | None, source: str) -> ModelConfig:
  """The bert_jax ELECTRA model of Hugging Face ``config.json`` objects.

  Args:
    discriminator: the discriminator's parsed config.json (model_type "electra").
    generator: the generator's, or None (then the generator takes the default fraction).
    source: the files' paths, for error messages.

  Raises:
    UserInputError: not ELECTRA configs, or a generator whose embedding width, vocab,
      positions or token types differ from the discriminator's.
  """
  disc = _bert_like(discriminator, source)
  config = dataclasses.replace(
    disc, family=names.ELECTRA, embedding_size=_embedding_size(discriminator, disc)
  )
  if generator is None:
    return config
  gen = _bert_like(generator, source)
  shared = ("vocab_size", "max_position_embeddings", "type_vocab_size")
  differing = [key for key in shared if getattr(gen, key) != getattr(disc, key)]
  if (_embedding_size(generator, gen) or gen.hidden_size) != (
    config.embedding_size or config.hidden_size
  ):
    differing.append("embedding_size")
  if differing:
    raise UserInputError(
      f"{source}: the generator's {', '.join(differing)} differ from the discriminator's; "
      "ELECTRA's generator shares its embeddings, so convert a matching pair"
    )
  options = ElectraOptions(
    generator_hidden_size=gen.hidden_size,
    generator_num_heads=gen.num_heads,
    generator_intermediate_size=gen.intermediate_size,
    generator_num_layers=gen.num_layers,
  )
  return config.with_sections(electra=options)


def lone_generator_config_from_hf(values: dict, source: str) -> ModelConfig:
  """The ``lone_generator`` model of an ``ElectraForMaskedLM``'s parsed config.json."""
  config = _bert_like(values, source)
  return dataclasses.replace(
    config,
    family=names.ELECTRA,
    embedding_size=_embedding_size(values, config),
    family_sections=config.family_sections.replace(electra=ElectraOptions(lone_generator=True)),
  )


def _bert_like(values, source: str) -> ModelConfig:
  if not isinstance(values, dict) or values.get("model_type") != names.ELECTRA:
    kind = values.get("model_type") if isinstance(values, dict) else None
    raise UserInputError(
      f"{source} describes a {kind!r} model, not an ELECTRA (model_type 'electra')"
    )
  # ELECTRA's config.json is BERT's plus embedding_size; the BERT reader checks the rest.
  config = hf_config.model_config_from_bert_config(dict(values, model_type="bert"), source)
  return config.with_sections(electra=ElectraOptions())


def _embedding_size(values: dict, config: ModelConfig) -> int:
  size = values.get("embedding_size") or config.hidden_size
  return 0 if size == config.hidden_size else size


def hf_configs_from_model_config(config: ModelConfig, with_heads: bool):
  """(discriminator, generator) ``config.json`` objects (``transformers.ElectraConfig`` keys).

  Args:
    config: the bert_jax ELECTRA model.
    with_heads: the export holds the discriminator head (else it is an ``ElectraModel``);
      a lone generator's is (None, its ``ElectraForMaskedLM`` config).
  """
  embedding_size = config.embedding_size or config.hidden_size
  if config.electra.lone_generator:
    gen = hf_config.bert_config_from_model_config(config, GENERATOR_ARCHITECTURE)
    gen.update(model_type=names.ELECTRA, embedding_size=embedding_size)
    return None, gen
  architecture = DISCRIMINATOR_ARCHITECTURE if with_heads else "ElectraModel"
  disc = hf_config.bert_config_from_model_config(config, architecture)
  disc.update(model_type=names.ELECTRA, embedding_size=embedding_size)
  gen = hf_config.bert_config_from_model_config(generator_config(config), GENERATOR_ARCHITECTURE)
  gen.update(model_type=names.ELECTRA, embedding_size=embedding_size)
  return disc, gen


# `write`'s Hugging Face directories under --output, one per model.
DIRECTORIES = ("discriminator", "generator")


def read_model_config(values, source: str, generator_values=None) -> ModelConfig:
  """`HfInterop.model_config`: the discriminator's config.json and the generator's (or None)."""
  return model_config_from_hf(values, generator_values, source)


def read_params(state, config: ModelConfig, source: str, generator_state=None):
  """`HfInterop.read_params`: the discriminator's state dict and the generator's (or None)."""
  return params_from_hf(state, generator_state, config, source)


def read_alone(values, state, config_source: str, source: str, generator=None):
  """`HfInterop.read_alone`: (model, params) of an ``ElectraForMaskedLM`` directory (a
  ``lone_generator`` model), or None for a discriminator's state.

  Raises:
    UserInputError: a generator directory was also passed (``generator``), or what
      `lone_generator_params_from_hf` refuses.
  """
  if not is_generator_state(state):
    return None
  if generator:
    raise UserInputError(
      f"{source} is an ELECTRA generator (ElectraForMaskedLM); pass the "
      "discriminator as --input with --generator, or drop --generator to convert it alone"
    )
  model = lone_generator_config_from_hf(values, config_source)
  return model, lone_generator_params_from_hf(state, model, source)


def write(params, config: ModelConfig):
  """`HfInterop.write`: the discriminator's and (if the run has one) the generator's dirs; a
  lone generator's one ``ElectraForMaskedLM``, written into the output directory itself."""
  states = hf_from_params(params, config)
  configs = hf_configs_from_model_config(config, "discriminator_head" in params)
  if config.electra.lone_generator:
    return {"": (configs[1], states[1])}, rows(config)
  directories = {d: (c, s) for d, c, s in zip(DIRECTORIES, configs, states) if s is not None}
  return directories, rows(config)
