"""The model-family registry: one entry per `names.FAMILIES`, picked by `model.family`."""

import jax
import jax.numpy as jnp
import pytest

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.config import ModelConfig
from bert_jax.models.families import model_config_from_dict
from bert_jax.tasks import trunk


def test_registry_covers_exactly_the_named_families():
  assert families.registered() == names.FAMILIES
  for name in names.FAMILIES:
    assert families.get(name).name == name


def test_unknown_family_is_one_line_naming_the_choices():
  with pytest.raises(
    UserInputError, match=r"model.family='deberta' is unknown; choose one of bert"
  ):
    model_config_from_dict({"size": "tiny", "family": "deberta"})
  with pytest.raises(UserInputError, match="is unknown"):
    families.get("deberta")


def test_task_trunk_is_the_family_encoder_under_the_bert_scope():
  config = ModelConfig(
    vocab_size=64,
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    intermediate_size=64,
    attention_kind="dense",
  )
  ids_BL = jnp.ones((2, 8), jnp.int32)
  params = (
    families.get(config.family)
    .pretraining_model(config, True)
    .init(jax.random.key(0), ids_BL, jnp.zeros_like(ids_BL), ids_BL)["params"]
  )
  assert trunk.NAME in params
  encoder = families.get(config.family).encoder(config, True)
  trunk_params = encoder.init(jax.random.key(0), ids_BL, jnp.zeros_like(ids_BL), ids_BL)["params"]
  shapes = lambda tree: jax.tree.map(jnp.shape, tree)
  assert shapes(params[trunk.NAME]) == shapes(trunk_params)
