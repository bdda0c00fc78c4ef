"""One source of defaults: the ConfigDict is generated from the settings dataclasses."""

import dataclasses

import ml_collections
import pytest

from bert_jax import config_fields, default_config, names
from bert_jax.data.pretraining_config import PretrainingDataConfig
from bert_jax.models import families
from bert_jax.models.config import DEFAULT_SIZE, MODEL_SIZES, LshOptions, ModelConfig
from bert_jax.parallel.mesh import MeshConfig
from bert_jax.tasks.finetune_config import FinetuneDataConfig
from bert_jax.train import settings as settings_lib
from bert_jax.train.optimizer import OptimizerConfig

_SECTIONS = default_config.SECTIONS


def _plain(section):
  return settings_lib._plain(section)  # pylint: disable=protected-access


def test_base_config_resolves_to_the_dataclasses_built_without_arguments():
  """Building every settings dataclass with no arguments gives what default_config gives."""
  resolved = settings_lib.settings_from_config(default_config.base_config())
  assert resolved == settings_lib.RunSettings(
    trainer=settings_lib.TrainerConfig(),
    model=ModelConfig(),
    data=PretrainingDataConfig(),
    optimizer=OptimizerConfig(),
    mesh=MeshConfig(),
  )


@pytest.mark.parametrize("task", names.FINETUNING_TASKS)
def test_config_keys_equal_the_dataclass_defaults_key_by_key(task):
  config = default_config.base_config()
  top = {k: v for k, v in _plain(config).items() if k not in _SECTIONS}
  assert top == config_fields.defaults(settings_lib.TrainerConfig)
  for name, cls in _SECTIONS.items():
    section = _plain(config[name])
    expected = config_fields.defaults(cls, families.SECTIONS if cls is ModelConfig else None)
    if cls is ModelConfig:
      # The size preset stands in for the four shape keys, which the ConfigDict leaves unset.
      assert section.pop("size") == DEFAULT_SIZE
      preset = dict(zip(("num_layers", "hidden_size", "num_heads"), MODEL_SIZES[DEFAULT_SIZE]))
      preset["intermediate_size"] = 4 * preset["hidden_size"]
      for key, value in preset.items():
        assert section[key] is None and expected[key] == value, key
        del section[key], expected[key]
    assert section == expected, name
  assert _plain(config.data) == config_fields.defaults(PretrainingDataConfig)
  finetune = default_config.finetune_config(task)
  assert _plain(finetune.data) == config_fields.defaults(FinetuneDataConfig)
  assert finetune.task == task


def test_every_key_is_described_once():
  lines = list(default_config.describe()) + list(default_config.describe(fine_tuning=True))
  keys = [line.split(" = ")[0] for line in lines]
  assert "model.lsh.n_buckets" in keys and "data.masking" in keys and "data.glue_task" in keys
  for cls in (*_SECTIONS.values(), LshOptions, PretrainingDataConfig, FinetuneDataConfig):
    for field in dataclasses.fields(cls):
      assert config_fields.description(field), f"{cls.__name__}.{field.name}"
  assert all(line.split("  # ", 1)[1] for line in lines)


def test_a_field_without_a_description_is_refused():
  @dataclasses.dataclass(frozen=True)
  class Undocumented:
    steps: int = 1

  with pytest.raises(ValueError, match="Undocumented.steps is not declared"):
    config_fields.config_dict(Undocumented)
  with pytest.raises(ValueError, match="needs a description"):
    config_fields.option(1)


def test_a_typed_placeholder_accepts_a_value_of_its_type_only():
  config = default_config.base_config()
  config.data.num_eval_examples = 64
  config.model.lsh.n_buckets = (16, 32)  # An int or a tuple: declared config_type=object.
  with pytest.raises(TypeError):
    config.data.num_eval_examples = "many"
  assert isinstance(config.model.lsh, ml_collections.ConfigDict)
