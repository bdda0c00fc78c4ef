"""What Hugging Face calls a family's pretraining model: the config.json objects its export writes.

The baselines build transformers' version of the model from these, so they name no family:
the family's own Hugging Face export (`Family.hf`) says which classes and sizes it maps to.
"""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.config import ModelConfig
from bert_jax.models.family_spec import MASKED_LM, REPLACED_TOKEN_DETECTION

# The pretraining objectives whose loss the baselines compute.
OBJECTIVES = (MASKED_LM, REPLACED_TOKEN_DETECTION)


def exported_configs(model_config: ModelConfig) -> dict:
  """{output subdirectory: config.json object} of the family's pretraining model.

  Exports a zero-filled copy of the model (the export needs parameters to choose its
  architectures; the values are not used).

  Raises:
    UserInputError: the family has no Hugging Face conversion, or pretrains with an objective
      the baselines do not compute.
  """
  family = families.get(model_config.family)
  if family.hf is None or family.pretraining_objective not in OBJECTIVES:
    raise UserInputError(
      f"the Hugging Face baselines train {' or '.join(OBJECTIVES)} models; model.family="
      f"{model_config.family!r} pretrains with {family.pretraining_objective or 'a causal LM'}"
      f"{'' if family.hf else ' and has no Hugging Face conversion'}; drop --baseline"
    )
  config = dataclasses.replace(
    model_config, scan_layers=False, remat_policy="none", attention_kind="dense"
  )
  ids = jnp.zeros((1, 2), jnp.int32)
  rngs = {"params": jax.random.key(0), "hashing": jax.random.key(0)}
  model = family.pretraining_model(config)
  shapes = jax.eval_shape(lambda: model.init(rngs, ids, ids, ids + 1))["params"]
  params = jax.tree.map(_zeros, shapes, is_leaf=lambda x: isinstance(x, nn.Partitioned))
  directories, _ = family.hf.write(params, config)
  return {directory: values for directory, (values, _) in directories.items()}


def _zeros(leaf):
  # A partitioned leaf's value, without `nn.unbox`: that would constrain it to the shardings of
  # whatever mesh the caller runs under (the benchmark builds the baselines inside its own).
  value = leaf.value if isinstance(leaf, nn.Partitioned) else leaf
  return np.zeros(value.shape, value.dtype)


def architectures(model_config: ModelConfig) -> dict:
  """{output subdirectory: transformers class name}, e.g. ``{"": "BertForPreTraining"}``."""
  return {d: values["architectures"][0] for d, values in exported_configs(model_config).items()}


def hf_config(transformers, values: dict, **extra):
  """transformers' config object of a config.json object (``extra`` overrides keys)."""
  values = dict(values, **extra)
  return transformers.AutoConfig.for_model(values.pop("model_type"), **values)
