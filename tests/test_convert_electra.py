"""ELECTRA interop: Hugging Face ElectraForPreTraining + ElectraForMaskedLM <-> bert_jax.

Random-init transformers models of two sizes (one with a non-default vocab and embedding size,
the other saved as pytorch_model.bin) convert into one bert_jax ELECTRA whose discriminator
hidden states and logits and generator MLM logits equal transformers' to 1e-5 with padding; the
export back is bit-identical and loads into transformers with no missing keys.
"""

import json

import jax
import numpy as np
import pytest

from bert_jax.models.electra.model import ElectraEncoder, ElectraForPreTraining
from bert_jax.tools import convert, workdir_params
from tests import hf_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

# (discriminator ElectraConfig fields, the generator's differing ones). "a": embedding width 24
# != hidden 48 (both models project), odd vocab; "b": E == H for the discriminator (no
# projection), three segment types, another LayerNorm epsilon, .bin files.
SIZES = {
  "a": (
    {
      "vocab_size": 211,
      "embedding_size": 24,
      "hidden_size": 48,
      "num_hidden_layers": 2,
      "num_attention_heads": 4,
      "intermediate_size": 64,
      "max_position_embeddings": 40,
    },
    {"hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 32},
  ),
  "b": (
    {
      "vocab_size": 97,
      "embedding_size": 32,
      "hidden_size": 32,
      "num_hidden_layers": 2,
      "num_attention_heads": 2,
      "intermediate_size": 48,
      "max_position_embeddings": 24,
      "type_vocab_size": 3,
      "layer_norm_eps": 1e-6,
    },
    {"hidden_size": 16, "num_attention_heads": 1, "intermediate_size": 24, "num_hidden_layers": 1},
  ),
}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
  """{name: (discriminator, generator, HF dir root, converted workdir)}."""
  root = tmp_path_factory.mktemp("convert_electra")
  result = {}
  for seed, (name, (sizes, generator_sizes)) in enumerate(SIZES.items()):
    disc, gen = hf_reference.random_electra_pair(
      transformers, torch, seed=10 * seed, generator=generator_sizes, **sizes
    )
    hf_root, workdir = root / f"hf_{name}", root / f"workdir_{name}"
    for model, subdirectory in ((disc, "discriminator"), (gen, "generator")):
      model.save_pretrained(hf_root / subdirectory, safe_serialization=name != "b")
    argv = [
      "convert",
      "--from=hf",
      f"--input={hf_root / 'discriminator'}",
      f"--generator={hf_root / 'generator'}",
      f"--output={workdir}",
    ]
    assert convert.main(argv) == 0
    result[name] = (disc, gen, hf_root, workdir)
  return result


def _torch(model, input_ids, token_types, mask):
  with torch.no_grad():
    return model(
      input_ids=torch.from_numpy(input_ids.astype(np.int64)),
      token_type_ids=torch.from_numpy(token_types.astype(np.int64)),
      attention_mask=torch.from_numpy(mask.astype(np.int64)),
      output_hidden_states=True,
    )


def _assert_close_on_real_tokens(ours, theirs, mask):
  real = mask.astype(bool)  # Padded positions are not compared: neither model defines them.
  np.testing.assert_allclose(np.asarray(ours)[real], np.asarray(theirs)[real], atol=1e-5, rtol=1e-5)


def _assert_equals_transformers(run, disc, gen, seed=0):
  inputs = hf_reference.random_inputs(
    run.model.vocab_size, type_vocab_size=run.model.type_vocab_size, seed=seed
  )
  disc_out, gen_out = _torch(disc, *inputs), _torch(gen, *inputs)
  ours = jax.jit(ElectraForPreTraining(run.model).apply)({"params": run.params}, *inputs)
  hidden, _ = jax.jit(ElectraEncoder(run.model).apply)({"params": run.params["bert"]}, *inputs)
  _assert_close_on_real_tokens(hidden, disc_out.hidden_states[-1].numpy(), inputs[2])
  _assert_close_on_real_tokens(ours["rtd_logits"], disc_out.logits.numpy(), inputs[2])
  _assert_close_on_real_tokens(ours["mlm_logits"], gen_out.logits.numpy(), inputs[2])


@pytest.mark.parametrize("name", ["a", "b"])
def test_converted_pair_equals_transformers(converted, name):
  disc, gen, _, workdir = converted[name]
  run = workdir_params.read_run(str(workdir))
  assert sorted(run.params) == ["bert", "discriminator_head", "generator", "generator_head"]
  assert run.model.family == "electra"
  assert run.model.electra.generator_hidden_size == gen.config.hidden_size
  assert run.model.type_vocab_size == disc.config.type_vocab_size
  _assert_equals_transformers(run, disc, gen)


@pytest.mark.parametrize("name", ["a", "b"])
def test_round_trip_is_bit_identical_and_loads_in_transformers(converted, name, tmp_path):
  disc, gen, _, workdir = converted[name]
  assert convert.main(["convert", "--to=hf", f"--input={workdir}", f"--output={tmp_path}"]) == 0
  for model, subdirectory in ((disc, "discriminator"), (gen, "generator")):
    exported = safetensors_numpy.load_file(str(tmp_path / subdirectory / "model.safetensors"))
    original = {
      k: v.numpy() for k, v in model.state_dict().items() if k != "generator_lm_head.weight"
    }
    assert exported.keys() == original.keys(), subdirectory
    for key, value in original.items():
      assert exported[key].dtype == value.dtype and np.array_equal(exported[key], value), key
  loaded = {}
  for model_class, subdirectory in (
    (transformers.ElectraForPreTraining, "discriminator"),
    (transformers.ElectraForMaskedLM, "generator"),
  ):
    loaded[subdirectory], info = model_class.from_pretrained(
      tmp_path / subdirectory, output_loading_info=True, attn_implementation="eager"
    )
    assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == ([], [], [])
  run = workdir_params.read_run(str(workdir))
  _assert_equals_transformers(run, loaded["discriminator"].eval(), loaded["generator"].eval(), 3)


def test_generator_with_other_embeddings_is_one_line_error(converted, tmp_path, capsys):
  disc, gen, hf_root, _ = converted["a"]
  with torch.no_grad():
    untied = transformers.ElectraForMaskedLM(gen.config)
    untied.load_state_dict(gen.state_dict())
    untied.electra.embeddings.position_embeddings.weight.add_(1.0)
  untied.save_pretrained(tmp_path / "untied")
  argv = [
    "convert",
    "--from=hf",
    f"--input={hf_root / 'discriminator'}",
    f"--generator={tmp_path / 'untied'}",
    f"--output={tmp_path / 'out'}",
  ]
  assert convert.main(argv) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "position_embeddings.weight differs from the discriminator's" in err[0]
  assert not (tmp_path / "out").exists()


def test_unsupported_family_directory_is_one_line_error(converted, tmp_path, capsys):
  _, _, hf_root, _ = converted["a"]
  config = json.loads((hf_root / "discriminator" / "config.json").read_text())
  (tmp_path / "d").mkdir()
  (tmp_path / "d" / "config.json").write_text(json.dumps(dict(config, model_type="deberta")))
  argv = ["convert", "--from=hf", f"--input={tmp_path / 'd'}", f"--output={tmp_path / 'o'}"]
  assert convert.main(argv) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "describes a 'deberta' model; convert handles model_type bert" in err[0]
  assert ", electra" in err[0] and not err[0].endswith("..."), err[0]  # Not cut short.
  assert "roberta, xlm-roberta, xlm" in err[0]
