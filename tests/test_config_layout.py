"""The model section's nested keys and the flat layout of earlier config.json files.

A run's config.json written before ``mem_len``, ``layer_sharing`` and the span boundary keys
moved into ``model.recurrence`` / ``model.albert`` / ``model.span_boundary`` must still resume,
be init_from'd, taught from and read by the tools; a config naming an old key is a one-line
error naming the new one.
"""

import dataclasses
import json
import shutil

import jax
import numpy as np
import pytest

from bert_jax.default_config import base_config, finetune_config
from bert_jax.errors import UserInputError
from bert_jax.models.config import stored_model_section
from bert_jax.models.families import model_config_from_dict
from bert_jax.models.transformer_xl import hf as transformer_xl_hf
from bert_jax.models.xlnet import hf as xlnet_hf
from bert_jax.tasks.distillation import read_teacher
from bert_jax.tools.workdir_params import read_run
from bert_jax.train import init_from
from bert_jax.train.settings import settings_from_config
from tests import finetune_fixtures

# The keys as config.json files had them before the sections (literal, not from MOVED_KEYS).
_FLAT = {
  "mem_len": 0,
  "eval_mem_len": -1,
  "clamp_len": -1,
  "same_length": False,
  "untie_r": True,
  "layer_sharing": "all",
  "span_boundary_objective": False,
  "span_boundary_max_offset": 10,
}
_SECTIONS = ("recurrence", "albert", "span_boundary")


def _old_layout_copy(workdir, destination, **flat):
  """A copy of ``workdir`` whose config.json has the flat layout (``flat`` overriding)."""
  shutil.copytree(workdir, destination, ignore=shutil.ignore_patterns("run.lock"))
  path = destination / "config.json"
  config = json.loads(path.read_text())
  for section in _SECTIONS:
    del config["model"][section]
  config["model"].update(_FLAT, **flat)
  path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
  return destination


def test_stored_flat_keys_move_into_their_sections():
  stored = {
    "model": {
      "family": "xlnet",
      "mem_len": 7,
      "eval_mem_len": 9,
      "clamp_len": 3,
      "layer_sharing": "ffn",
      "span_boundary_objective": True,
      "span_boundary_max_offset": 5,
      # A section the file also names wins over its flat key.
      "recurrence": {"untie_r": False, "clamp_len": 4},
    }
  }
  model = model_config_from_dict(stored_model_section(stored))
  assert (model.recurrence.mem_len, model.recurrence.eval_mem_len) == (7, 9)
  assert (model.recurrence.clamp_len, model.recurrence.untie_r) == (4, False)
  assert model.albert.layer_sharing == "ffn"
  assert (model.span_boundary.enabled, model.span_boundary.max_offset) == (True, 5)
  assert stored_model_section({}) == {}


@pytest.mark.parametrize(
  "key,new",
  [
    ("mem_len", "model.recurrence.mem_len"),
    ("untie_r", "model.recurrence.untie_r"),
    ("layer_sharing", "model.albert.layer_sharing"),
    ("span_boundary_objective", "model.span_boundary.enabled"),
    ("span_boundary_max_offset", "model.span_boundary.max_offset"),
  ],
)
def test_a_config_naming_an_old_key_is_a_one_line_error(key, new):
  config = base_config()
  config.model[key] = _FLAT[key]  # A config file of the earlier layout.
  with pytest.raises(UserInputError, match=f"model.{key} is now {new};") as error:
    settings_from_config(config)
  assert "\n" not in str(error.value)


def test_hugging_face_tables_write_and_read_the_nested_keys():
  xl = model_config_from_dict(
    {
      "family": "transformer_xl",
      "size": "tiny",
      "causal": True,
      "attention_kind": "dense",
      "recurrence": {"mem_len": 6, "clamp_len": 5, "same_length": True, "untie_r": False},
    }
  )
  values = transformer_xl_hf.config_json(xl, "TransfoXLLMHeadModel")
  assert (values["mem_len"], values["clamp_len"], values["same_length"], values["untie_r"]) == (
    6,
    5,
    True,
    False,
  )
  assert transformer_xl_hf.model_config(values, "x").recurrence == xl.recurrence
  xlnet = model_config_from_dict(
    {"family": "xlnet", "size": "tiny", "recurrence": {"mem_len": 8, "clamp_len": 3}}
  )
  values = xlnet_hf.config_json(xlnet, "XLNetLMHeadModel")
  assert (values["mem_len"], values["clamp_len"]) == (8, 3)
  assert xlnet_hf.model_config(values, "x").recurrence == xlnet.recurrence


@pytest.fixture(scope="module")
def planted(tiny_pretrained_workdir, tmp_path_factory):
  """The fixture run with a flat config.json whose moved keys are not the defaults."""
  return _old_layout_copy(
    tiny_pretrained_workdir,
    tmp_path_factory.mktemp("old_layout") / "run",
    mem_len=7,
    layer_sharing="none",
    span_boundary_max_offset=5,
  )


def test_init_from_an_old_layout_run_inherits_the_moved_keys(planted, tiny_pretrained_workdir):
  def inherited(init_from):
    config = finetune_config("classification")
    config.init_from = str(init_from)
    config.data.train_path = config.data.eval_path = str(planted / "config.json")  # Unread.
    return settings_from_config(config).model

  model = inherited(planted)
  assert model.recurrence.mem_len == 7
  assert model.albert.layer_sharing == "none"
  assert model.span_boundary.max_offset == 5
  expected = inherited(tiny_pretrained_workdir)
  assert model == dataclasses.replace(
    expected.with_sections(albert=model.albert),
    recurrence=model.recurrence,
    span_boundary=model.span_boundary,
  )
  assert expected.recurrence.mem_len == 0  # The planted values came from the old file.


def test_tools_and_teachers_read_an_old_layout_run(planted, tiny_pretrained_workdir):
  assert read_run(str(planted)).model.recurrence.mem_len == 7  # embed, convert --to=hf.
  student = read_run(str(tiny_pretrained_workdir)).model
  teacher = read_teacher(str(planted), student)
  assert (teacher.model.albert.layer_sharing, teacher.model.num_layers) == ("none", 2)


def test_an_old_layout_run_resumes(tiny_pretrained_workdir, tmp_path):
  workdir = _old_layout_copy(tiny_pretrained_workdir, tmp_path / "run")
  finetune_fixtures.pretrain_tiny(workdir, num_train_steps=41)  # One step past the copy's 40.
  steps = sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
  assert steps[-1] == 41
  stored = stored_model_section(json.loads((workdir / "config.json").read_text()))
  assert model_config_from_dict(stored) == read_run(str(tiny_pretrained_workdir)).model


def test_a_fine_tuning_flag_sets_one_key_of_a_section(planted):
  config = finetune_config("classification")
  config.init_from = str(planted)
  config.data.train_path = config.data.eval_path = str(planted / "config.json")  # Unread.
  config.model.recurrence.eval_mem_len = 3  # --config.model.recurrence.eval_mem_len=3
  model = settings_from_config(config).model
  # The section's other keys, and the other sections, are still init_from's.
  assert (model.recurrence.mem_len, model.recurrence.eval_mem_len) == (7, 3)
  assert (model.albert.layer_sharing, model.span_boundary.max_offset) == ("none", 5)


def test_a_misfit_names_the_nested_keys_that_differ(planted, tiny_pretrained_workdir):
  run = read_run(str(tiny_pretrained_workdir))
  params = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), run.params)
  params["bert"]["embeddings"]["word_embeddings"]["embedding"] = jax.ShapeDtypeStruct(
    (10, run.model.hidden_size), np.float32
  )
  with pytest.raises(UserInputError) as error:
    init_from.check_fits(str(planted), params, run.model)
  assert "--config.model.recurrence.mem_len=7 " in str(error.value)
  assert "--config.model.albert.layer_sharing=none " in str(error.value)
  assert "--config.model.span_boundary.max_offset=5 " in str(error.value)
  assert "--config.model.vocab_size=8192" not in str(error.value)  # Equal in both.
