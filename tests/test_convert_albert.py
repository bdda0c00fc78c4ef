"""ALBERT equals Hugging Face's: parameter counts, converted random-init models (outputs and
gradients, with padding), bert_jax -> HF -> bert_jax round trips, and refused layouts."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.errors import UserInputError
from bert_jax.models.albert import hf_weights as albert_weights
from bert_jax.models.albert.model import AlbertEncoder, AlbertForPreTraining
from bert_jax.models.families import model_config_from_dict
from bert_jax.tools import convert, workdir_params
from tests import hf_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

_BASE = {"num_layers": 12, "hidden_size": 768, "num_heads": 12, "intermediate_size": 3072}
_LARGE = {"num_layers": 24, "hidden_size": 1024, "num_heads": 16, "intermediate_size": 4096}


def _count(module, with_positions=False):
  ids = jnp.zeros((1, 8), jnp.int32)
  extra = (ids[:, :2],) if with_positions else ()
  init = lambda: module.init(jax.random.key(0), ids, ids, ids + 1, *extra)
  return sum(x.size for x in jax.tree.leaves(jax.eval_shape(init)))


# Counts of transformers 4.57.6's PyTorch classes (vocab 30000, E=128), measured once:
# (AlbertModel, AlbertForPreTraining) with num_hidden_groups 1 ("all") and = layers ("none").
@pytest.mark.parametrize(
  "size,sharing,expected",
  [
    (_BASE, "all", (11_683_584, 11_813_810)),
    (_LARGE, "all", (17_683_968, 17_847_474)),
    (_BASE, "none", (89_650_176, 89_780_402)),
  ],
  ids=["base", "large", "base_unshared"],
)
def test_parameter_counts_equal_hugging_face(size, sharing, expected):
  config = model_config_from_dict(
    {
      "family": "albert",
      "vocab_size": 30000,
      "embedding_size": 128,
      "albert": {"layer_sharing": sharing},
      **size,
    }
  )
  assert (_count(AlbertEncoder(config)), _count(AlbertForPreTraining(config), True)) == expected


# Two sizes: "a" shares all layers (one group), non-default vocab and E, gelu_new, safetensors;
# "b" shares none (a group per layer), E > H, exact gelu, 3 segment types, eps 1e-6, .bin.
SIZES = {
  "a": {
    "vocab_size": 211,
    "embedding_size": 24,
    "hidden_size": 64,
    "num_hidden_layers": 3,
    "num_hidden_groups": 1,
    "num_attention_heads": 4,
    "intermediate_size": 96,
    "max_position_embeddings": 40,
  },
  "b": {
    "vocab_size": 97,
    "embedding_size": 56,
    "hidden_size": 48,
    "num_hidden_layers": 2,
    "num_hidden_groups": 2,
    "num_attention_heads": 3,
    "intermediate_size": 80,
    "max_position_embeddings": 24,
    "type_vocab_size": 3,
    "layer_norm_eps": 1e-6,
    "hidden_act": "gelu",
  },
}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
  """{name: (torch model, HF dir, converted workdir)}."""
  root = tmp_path_factory.mktemp("convert_albert")
  result = {}
  for seed, (name, sizes) in enumerate(SIZES.items()):
    model = hf_reference.random_albert(transformers, torch, seed=seed, **sizes)
    hf_dir, workdir = root / f"hf_{name}", root / f"workdir_{name}"
    model.save_pretrained(hf_dir, safe_serialization=name == "a")
    assert convert.main(["convert", "--from=hf", f"--input={hf_dir}", f"--output={workdir}"]) == 0
    result[name] = (model, hf_dir, workdir)
  return result


def _close_on_real_tokens(ours, theirs, mask):
  real = mask.astype(bool)  # Padded positions are not compared: neither model defines them.
  np.testing.assert_allclose(np.asarray(ours)[real], np.asarray(theirs)[real], atol=1e-5, rtol=1e-5)


def _torch_inputs(input_ids, token_types, mask):
  return {
    "input_ids": torch.from_numpy(input_ids.astype(np.int64)),
    "token_type_ids": torch.from_numpy(token_types.astype(np.int64)),
    "attention_mask": torch.from_numpy(mask.astype(np.int64)),
  }


@pytest.mark.parametrize("name", ["a", "b"])
def test_converted_model_equals_transformers(converted, name):
  model, _, workdir = converted[name]
  run = workdir_params.read_run(str(workdir))
  assert run.model.family == "albert"
  assert run.model.albert.layer_sharing == ("all" if name == "a" else "none")
  assert sorted(run.params) == ["bert", "mlm_head", "sop_head"]
  inputs = hf_reference.random_inputs(
    run.model.vocab_size, type_vocab_size=run.model.type_vocab_size
  )
  with torch.no_grad():
    reference = model(**_torch_inputs(*inputs), output_hidden_states=True)
    pooled = model.albert(**_torch_inputs(*inputs)).pooler_output.numpy()
  hidden, ours_pooled = jax.jit(AlbertEncoder(run.model).apply)(
    {"params": run.params["bert"]}, *inputs
  )
  logits = jax.jit(AlbertForPreTraining(run.model).apply)({"params": run.params}, *inputs)
  _close_on_real_tokens(hidden, reference.hidden_states[-1].numpy(), inputs[2])
  _close_on_real_tokens(logits["mlm_logits"], reference.prediction_logits.numpy(), inputs[2])
  np.testing.assert_allclose(
    logits["nsp_logits"], reference.sop_logits.numpy(), atol=1e-5, rtol=1e-5
  )
  np.testing.assert_allclose(ours_pooled, pooled, atol=1e-5, rtol=1e-5)


def test_gradients_equal_transformers(converted):
  """d(weighted MLM + SOP logits on real tokens)/d(params) matches torch's, tensor by tensor."""
  model, _, workdir = converted["a"]
  run = workdir_params.read_run(str(workdir))
  input_ids, token_types, mask = hf_reference.random_inputs(run.model.vocab_size, seed=3)
  rng = np.random.default_rng(0)
  mlm_w = (rng.normal(size=(*input_ids.shape, run.model.vocab_size)) * mask[:, :, None]).astype(
    np.float32
  )
  sop_w = rng.normal(size=(input_ids.shape[0], 2)).astype(np.float32)

  def objective(params):
    out = AlbertForPreTraining(run.model).apply({"params": params}, input_ids, token_types, mask)
    return jnp.sum(out["mlm_logits"] * mlm_w) + jnp.sum(out["nsp_logits"] * sop_w)

  ours = jax.jit(jax.grad(objective))(run.params)
  model.zero_grad()
  out = model(**_torch_inputs(input_ids, token_types, mask))
  loss = (out.prediction_logits * torch.from_numpy(mlm_w)).sum() + (
    out.sop_logits * torch.from_numpy(sop_w)
  ).sum()
  loss.backward()
  grads = {name: p.grad.numpy() for name, p in model.named_parameters()}
  theirs = albert_weights.params_from_hf(grads, run.model)
  hf_reference.assert_gradients_equal(ours, theirs)


@pytest.mark.parametrize("name", ["a", "b"])
def test_round_trip_gives_identical_tensors_and_transformers_loads_it(converted, name, tmp_path):
  model, _, workdir = converted[name]
  assert (
    convert.main(["convert", "--to=hf", f"--input={workdir}", f"--output={tmp_path / 'hf'}"]) == 0
  )
  exported = safetensors_numpy.load_file(str(tmp_path / "hf" / "model.safetensors"))
  tied = {"predictions.decoder.weight", "predictions.decoder.bias"}
  original = {k: v.numpy() for k, v in model.state_dict().items() if k not in tied}
  assert exported.keys() == original.keys()
  for key, value in original.items():
    assert exported[key].dtype == value.dtype and np.array_equal(exported[key], value), key
  loaded, info = transformers.AlbertForPreTraining.from_pretrained(
    tmp_path / "hf", output_loading_info=True
  )
  assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == ([], [], [])
  assert loaded.config.num_hidden_groups == model.config.num_hidden_groups
  assert loaded.config.hidden_act == model.config.hidden_act
  # And back into bert_jax: the same params, bit for bit.
  assert (
    convert.main(
      ["convert", "--from=hf", f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'back'}"]
    )
    == 0
  )
  first = workdir_params.read_run(str(workdir)).params
  again = workdir_params.read_run(str(tmp_path / "back")).params
  jax.tree.map(np.testing.assert_array_equal, first, again)


def test_albert_model_checkpoint_converts(tmp_path):
  model = hf_reference.random_albert(transformers, torch, kind="model", seed=7, **SIZES["a"])
  model.save_pretrained(tmp_path / "hf")
  assert (
    convert.main(
      ["convert", "--from=hf", f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'out'}"]
    )
    == 0
  )
  run = workdir_params.read_run(str(tmp_path / "out"))
  assert sorted(run.params) == ["bert"]
  inputs = hf_reference.random_inputs(run.model.vocab_size)
  with torch.no_grad():
    reference = model(**_torch_inputs(*inputs)).last_hidden_state.numpy()
  hidden, _ = jax.jit(AlbertEncoder(run.model).apply)({"params": run.params["bert"]}, *inputs)
  _close_on_real_tokens(hidden, reference, inputs[2])


def _edit_config(directory, **changes):
  config = json.loads((directory / "config.json").read_text())
  config.update(changes)
  (directory / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize(
  "changes,expected",
  [
    ({"num_hidden_groups": 3, "inner_group_num": 2}, "num_hidden_groups=3, inner_group_num=2"),
    ({"hidden_act": "relu"}, "hidden_act='relu'; bert_jax's ALBERT computes"),
    ({"embedding_size": 30}, "of another shape than the config implies"),
  ],
  ids=["groups", "activation", "embedding_size"],
)
def test_unsupported_hugging_face_albert_fails_with_one_line(
  converted, tmp_path, capsys, changes, expected
):
  import shutil  # pylint: disable=g-import-not-at-top

  shutil.copytree(converted["a"][1], tmp_path / "hf")
  _edit_config(tmp_path / "hf", **changes)
  assert (
    convert.main(
      ["convert", "--from=hf", f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'out'}"]
    )
    == 2
  )
  errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and expected in errors[0], errors
  assert not (tmp_path / "out").exists()


def test_partial_sharing_has_no_hugging_face_layout():
  from bert_jax.models.albert import hf_config as albert_config  # pylint: disable=g-import-not-at-top

  config = model_config_from_dict(
    {"family": "albert", "size": "tiny", "albert": {"layer_sharing": "ffn"}}
  )
  with pytest.raises(UserInputError, match="layer_sharing='ffn' has no Hugging Face ALBERT layout"):
    albert_config.config_json(config, "AlbertForPreTraining")


def test_bert_with_the_tanh_gelu_is_not_exported_as_exact_gelu():
  from bert_jax.models.interop import hf_config  # pylint: disable=g-import-not-at-top

  config = model_config_from_dict({"size": "tiny", "hidden_act": "gelu_new"})
  with pytest.raises(UserInputError, match="model.hidden_act='gelu_new': Hugging Face BERT"):
    hf_config.bert_config_from_model_config(config, "BertModel")


@pytest.mark.parametrize("name", ["a", "b"])
def test_embed_hidden_states_and_attention_equal_transformers(converted, name):
  """tools/embed's forward on ALBERT: hidden state 0 is the projected embeddings (as
  transformers' hidden_states[0]); a shared layer yields one state per application."""
  from bert_jax.tools import embed  # pylint: disable=g-import-not-at-top

  model, _, workdir = converted[name]
  run = workdir_params.read_run(str(workdir))
  inputs = hf_reference.random_inputs(
    run.model.vocab_size, type_vocab_size=run.model.type_vocab_size
  )
  num_layers = run.model.num_layers
  out = embed._forward(  # pylint: disable=protected-access
    run.params["bert"],
    *inputs,
    model=dataclasses.replace(run.model, attention_kind="dense"),
    layers=tuple(range(num_layers + 1)),
    with_attention=True,
  )
  with torch.no_grad():
    reference = model(**_torch_inputs(*inputs), output_hidden_states=True, output_attentions=True)
  real = inputs[2].astype(bool)
  assert out["hidden"].shape[1] == num_layers + 1 and out["attention"].shape[1] == num_layers
  for k in range(num_layers + 1):
    _close_on_real_tokens(out["hidden"][:, k], reference.hidden_states[k].numpy(), inputs[2])
  for k in range(num_layers):
    ours = np.asarray(out["attention"][:, k]).transpose(0, 2, 1, 3)[real]  # [real queries, H, L]
    theirs = reference.attentions[k].numpy().transpose(0, 2, 1, 3)[real]
    np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=1e-5)
