"""The family-only sections of the model config (model.electra, model.adaptive, ...): declared
by the family records, assembled by the registry, stored exactly as before they moved there."""

import dataclasses
import hashlib
import json

import numpy as np
import pytest

from bert_jax import config_fields, default_config
from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.config import ModelConfig
from bert_jax.models.electra.options import ElectraOptions
from bert_jax.models.family_sections import FamilySections
from bert_jax.models.xlm import hf as xlm_hf
from bert_jax.train import settings as settings_lib
from bert_jax.train import teacher

# name -> (model section, sha256 of its sorted JSON, teacher fingerprint of _PARAMS), computed
# with `dataclasses.asdict` when ModelConfig declared every family's section as its own field:
# config.json files and distillation teacher fingerprints of earlier runs stay valid.
_STORED = {
  "bert": (
    {"size": "tiny", "vocab_size": 128},
    "e317f63092d3839668c3ba9ef083b88441dd8a453513d661d9690864da7d60b0",
    "9fad2e620755a724",
  ),
  "electra": (
    {
      "size": "tiny",
      "family": "electra",
      "embedding_size": 64,
      "electra": {"rtd_weight": 30.0, "generator_fraction": 0.5},
    },
    "9939fde364e5a2c5b73d12129a942c938299b29dd2f37b1cc67cc6d00a7bbd66",
    "65fa1e0b7cd2048d",
  ),
  "transformer_xl": (
    {
      "size": "tiny",
      "family": "transformer_xl",
      "causal": True,
      "vocab_size": 1000,
      "adaptive": {"cutoffs": [200, 500], "div_val": 2, "tie_projs": [False, True]},
      "recurrence": {"mem_len": 8},
    },
    "61963c548429fc1f0313dbb75dea0651e5311c4fdb5e5a9808ff51fe65018d6d",
    "6d121ac731607838",
  ),
  "xlm": (
    {"size": "tiny", "family": "xlm", "xlm": {"languages": ["en", "fr"], "language": "fr"}},
    "c7bdf604d08717d2d4dc2b9ff517d77395dbfb50cadf3fbd5cbac77a499406d7",
    "bc0c6cd6565fd70d",
  ),
  "albert": (
    {"size": "tiny", "family": "albert", "albert": {"layer_sharing": "none"}},
    "ac1085125a8420b274e273a7e58a3fb681986c6cbef4b1a7b11d1daaa595174f",
    "b2bf267e96832abe",
  ),
  "xlm_roberta": (
    {"size": "tiny", "family": "xlm_roberta", "roberta": {"padding_idx": 0}},
    "510c6869f3d6f18496d89fa9bca10287e55ac22566a9c0081bf66d1024969ecf",
    "3ea88a49927f4165",
  ),
}
_PARAMS = {"a": {"kernel": np.arange(6, dtype=np.float32).reshape(2, 3)}}


@pytest.mark.parametrize("name", sorted(_STORED))
def test_a_stored_model_is_the_json_of_earlier_runs(name):
  section, digest, fingerprint = _STORED[name]
  model = families.model_config_from_dict(section)
  stored = json.dumps(model.to_dict(), sort_keys=True)
  assert hashlib.sha256(stored.encode()).hexdigest() == digest
  assert teacher.fingerprint(_PARAMS, model) == fingerprint
  assert families.model_config_from_dict(json.loads(stored)) == model  # config.json reads back.


def test_every_family_section_is_a_model_key_declared_by_its_family():
  declared = {n: c for f in families.registered() for n, c in families.get(f).sections.items()}
  assert declared == families.SECTIONS
  assert set(declared) == {"albert", "electra", "adaptive", "roberta", "xlm"}
  fields = {field.name for field in dataclasses.fields(ModelConfig)}
  assert not fields & set(declared)  # Not declared by models/config.py.
  keys = [entry.key for entry in default_config.config_keys()]
  for name, options in declared.items():
    for field in dataclasses.fields(options):
      assert keys.count(f"model.{name}.{field.name}") == 1
  assert not [key for key in keys if key.startswith("model.family_sections")]
  assert default_config.base_config().model.adaptive.div_val == 1


def test_a_family_key_set_on_the_command_line_reaches_the_model():
  config = default_config.base_config()
  config.model.size = "tiny"
  config.model.family = "electra"
  config.model.electra.rtd_weight = 12.5
  model = settings_lib.settings_from_config(config).model
  assert model.electra.rtd_weight == 12.5
  assert model.to_dict()["electra"]["rtd_weight"] == 12.5


def test_bad_section_keys_are_one_line_errors_listing_the_valid_keys():
  with pytest.raises(UserInputError, match=r"unknown model.electra config keys \['width'\]"):
    families.model_config_from_dict({"electra": {"width": 3}})
  with pytest.raises(UserInputError, match=r"unknown model config keys \['electro'\]") as error:
    families.model_config_from_dict({"electro": {}})
  assert "'adaptive', 'albert'" in str(error.value) and "'xlm'" in str(error.value)
  assert "family_sections" not in str(error.value)
  with pytest.raises(UserInputError, match="model.layer_sharing is now model.albert.layer_sharing"):
    families.model_config_from_dict({"layer_sharing": "none"})


def test_the_families_with_memory_refuse_scanned_layers_however_the_config_is_built():
  message = "model.family='transformer_xl' runs its own unscanned, non-reversible layers"
  with pytest.raises(UserInputError, match=message):
    families.model_config_from_dict(
      {"size": "tiny", "family": "transformer_xl", "causal": True, "scan_layers": True}
    )
  xl = families.model_config_from_dict({"size": "tiny", "family": "transformer_xl", "causal": True})
  with pytest.raises(UserInputError, match=message):
    dataclasses.replace(xl, reversible=True)
  bert = dataclasses.replace(xl, family="bert", causal=False, scan_layers=True)  # Others may.
  assert bert.scan_layers


def test_a_section_is_replaced_and_a_missing_one_named():
  model = families.model_config_from_dict({"size": "tiny", "family": "electra"})
  changed = model.with_sections(electra=ElectraOptions(rtd_weight=1.0))
  assert (changed.electra.rtd_weight, model.electra.rtd_weight) == (1.0, 50.0)
  assert changed != model and hash(changed) != hash(model)
  bare = ModelConfig()
  with pytest.raises(AttributeError, match="has no section model.electra; build it with"):
    bare.electra  # noqa: B018
  # Sections at their defaults are what a config without them means.
  assert bare == families.model_config_from_dict({}) and hash(bare) == hash(ModelConfig())
  assert FamilySections({"electra": ElectraOptions()}) == FamilySections()


def test_a_converted_config_is_stored_with_every_family_section():
  """A family's Hugging Face reader builds its own section only; stored, the model has all."""
  values = {
    "model_type": "xlm",
    "vocab_size": 64,
    "emb_dim": 32,
    "n_layers": 2,
    "n_heads": 2,
    "max_position_embeddings": 16,
    "n_langs": 2,
    "lang2id": {"en": 0, "fr": 1},
  }
  read = xlm_hf.model_config(values, "config.json")
  assert set(read.family_sections) == {"xlm"}
  stored = families.complete(read).to_dict()
  assert stored == families.model_config_from_dict(stored).to_dict()
  assert set(families.SECTIONS) <= set(stored) and stored["xlm"]["languages"] == ("en", "fr")
  assert config_fields.SECTIONS not in stored
