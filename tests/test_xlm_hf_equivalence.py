"""XLM equals transformers' XLMWithLMHeadModel / XLMModel: outputs and gradients with padding,
language embeddings, restarted positions, causal + sinusoidal; convert both ways bit-exact."""

import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models import families
from bert_jax.models.families import model_config_from_dict
from bert_jax.models.xlm import hf as xlm_hf
from bert_jax.tools import convert, workdir_params
from tests import hf_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

_SIZE = {"vocab_size": 61, "emb_dim": 32, "n_layers": 2, "n_heads": 4}
# name -> (kind, XLMConfig fields, saved as safetensors).
MODELS = {
  # Two languages (the task's case), learned positions.
  "lm": (
    "lm",
    dict(_SIZE, n_langs=2, lang2id={"en": 0, "fr": 1}, max_position_embeddings=24),
    True,
  ),
  # CLM: causal, fixed sinusoidal positions, three languages, a .bin with the tied copy.
  "clm": (
    "lm",
    dict(
      _SIZE,
      causal=True,
      sinusoidal_embeddings=True,
      n_langs=3,
      lang2id={"de": 0, "en": 1, "fr": 2},
      max_position_embeddings=20,
      layer_norm_eps=1e-6,
    ),
    False,
  ),
  # A bare XLMModel of one language (no language table, no head).
  "model": ("model", dict(_SIZE, emb_dim=24, n_heads=3, max_position_embeddings=16), True),
}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
  """{name: (torch model, HF dir, converted workdir)}."""
  root = tmp_path_factory.mktemp("xlm")
  result = {}
  for seed, (name, (kind, fields, safe)) in enumerate(MODELS.items()):
    model = hf_reference.random_xlm(transformers, torch, kind=kind, seed=seed, **fields)
    hf_dir, workdir = root / f"hf_{name}", root / f"workdir_{name}"
    model.save_pretrained(hf_dir, safe_serialization=safe)
    assert convert.main(["convert", "--from=hf", f"--input={hf_dir}", f"--output={workdir}"]) == 0
    result[name] = (model, hf_dir, workdir)
  return result


def _inputs(run, seed=0):
  n_langs = run.model.xlm.n_langs
  return hf_reference.random_inputs(run.model.vocab_size, type_vocab_size=n_langs, seed=seed)


def _ours(run, params, input_ids, langs, mask, positions=None):
  model = families.get("xlm").pretraining_model(run.model)
  out = model.apply({"params": params}, input_ids, None, mask, None, positions, langs)
  return out["mlm_logits"]


@pytest.mark.parametrize("name", ["lm", "clm"])
def test_outputs_equal_transformers_everywhere(converted, name):
  model, _, workdir = converted[name]
  run = workdir_params.read_run(str(workdir))
  assert run.model.family == "xlm" and sorted(run.params) == ["bert", "mlm_head"]
  assert run.model.xlm.languages == tuple(model.config.lang2id)
  assert run.model.causal == model.config.causal
  input_ids, langs, mask = _inputs(run)
  reference = hf_reference.torch_outputs(torch, model, input_ids, langs, mask)
  encoder = families.get("xlm").encoder(run.model)
  hidden, first = jax.jit(encoder.apply)(
    {"params": run.params["bert"]}, input_ids, None, mask, None, langs
  )
  logits = jax.jit(lambda p: _ours(run, p, input_ids, langs, mask))(run.params)
  # Padded rows too: XLM zeroes them (hidden) and leaves the bias there (logits).
  np.testing.assert_allclose(hidden, reference["hidden_states"][-1], atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(first, reference["hidden_states"][-1][:, 0], atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(logits, reference["mlm_logits"], atol=1e-5, rtol=1e-5)
  assert np.all(np.asarray(hidden)[mask == 0] == 0)


def test_restarted_positions_and_languages_matter_and_match(converted):
  """TLM's input: positions restart at the second sentence, one language per sentence."""
  model, _, workdir = converted["lm"]
  run = workdir_params.read_run(str(workdir))
  input_ids, _, mask = _inputs(run, seed=1)
  positions = np.concatenate([np.arange(6), np.arange(7)])[None].repeat(3, 0).astype(np.int32)
  langs = (np.arange(13) >= 6)[None].repeat(3, 0).astype(np.int32)
  with torch.no_grad():
    theirs = model(
      input_ids=torch.from_numpy(input_ids.astype(np.int64)),
      attention_mask=torch.from_numpy(mask.astype(np.int64)),
      langs=torch.from_numpy(langs.astype(np.int64)),
      position_ids=torch.from_numpy(positions.astype(np.int64)),
    ).logits.numpy()
  ours = _ours(run, run.params, input_ids, langs, mask, positions)
  np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=1e-5)
  default = _ours(run, run.params, input_ids, langs, mask)
  one_language = _ours(run, run.params, input_ids, 0 * langs, mask, positions)
  assert np.abs(default - ours).max() > 1e-2 and np.abs(one_language - ours).max() > 1e-2


@pytest.mark.parametrize("name", ["lm", "clm"])
def test_gradients_equal_transformers_with_padding(converted, name):
  """d(weighted logits on real tokens)/d(params) matches torch's, tensor by tensor."""
  model, _, workdir = converted[name]
  run = workdir_params.read_run(str(workdir))
  input_ids, langs, mask = _inputs(run, seed=2)
  rng = np.random.default_rng(0)
  weights = (rng.normal(size=(*input_ids.shape, run.model.vocab_size)) * mask[:, :, None]).astype(
    np.float32
  )
  ours = jax.jit(jax.grad(lambda p: jnp.sum(_ours(run, p, input_ids, langs, mask) * weights)))(
    run.params
  )
  model.zero_grad()
  out = model(
    input_ids=torch.from_numpy(input_ids.astype(np.int64)),
    attention_mask=torch.from_numpy(mask.astype(np.int64)),
    langs=torch.from_numpy(langs.astype(np.int64)),
  )
  (out.logits * torch.from_numpy(weights)).sum().backward()
  grads = {
    n: (p.grad if p.grad is not None else torch.zeros_like(p)).numpy()
    for n, p in model.named_parameters()
  }
  theirs = xlm_hf.params_from_hf(grads, run.model)
  flat_ours = dict(jax.tree_util.tree_leaves_with_path(ours))
  assert flat_ours.keys() == dict(jax.tree_util.tree_leaves_with_path(theirs)).keys()
  hf_reference.assert_gradients_equal(ours, theirs)
  if name == "clm":  # Fixed sinusoids: no gradient on either side.
    table = flat_ours[
      next(p for p in flat_ours if "position_embeddings" in jax.tree_util.keystr(p))
    ]
    assert not np.any(np.asarray(table))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_round_trip_gives_identical_tensors_and_loads_in_transformers(converted, name, tmp_path):
  model, _, workdir = converted[name]
  assert convert.main(["convert", "--to=hf", f"--input={workdir}", f"--output={tmp_path}"]) == 0
  exported = safetensors_numpy.load_file(str(tmp_path / "model.safetensors"))
  prefix = "transformer." if name == "model" else ""  # XLMModel names gain the prefix.
  original = {
    f"{prefix}{k}": v.numpy()
    for k, v in model.state_dict().items()
    if k not in ("pred_layer.proj.weight", "position_ids", "transformer.position_ids")
  }
  assert exported.keys() == original.keys()
  for key, value in original.items():
    assert exported[key].dtype == value.dtype and np.array_equal(exported[key], value), key
  config = json.loads((tmp_path / "config.json").read_text())
  assert config["lang2id"] == (getattr(model.config, "lang2id", None) or {})
  model_class = transformers.XLMModel if name == "model" else transformers.XLMWithLMHeadModel
  reloaded, info = model_class.from_pretrained(tmp_path, output_loading_info=True)
  assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == ([], [], [])
  assert reloaded.config.causal == model.config.causal


@pytest.mark.parametrize(
  "change,expected",
  [
    ({"asm": True}, "asm=True"),
    ({"gelu_activation": False}, "gelu_activation=False"),
    ({"lang2id": None, "id2lang": None}, "n_langs=2 but no lang2id"),
  ],
)
def test_unsupported_xlm_configs_fail_with_one_line(converted, tmp_path, capsys, change, expected):
  hf_dir = tmp_path / "hf"
  shutil.copytree(converted["lm"][1], hf_dir)
  config = json.loads((hf_dir / "config.json").read_text())
  config.update(change)
  (hf_dir / "config.json").write_text(json.dumps(config))
  assert convert.main(["convert", "--from=hf", f"--input={hf_dir}", f"--output={tmp_path}/o"]) == 2
  errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and expected in errors[0], errors


@pytest.mark.parametrize("part,expected", [("model", 248_976_384), ("lm", 249_071_384)])
def test_parameter_counts_of_xlm_base_equal_transformers(part, expected):
  """configs/xlm_base.py's sizes (xlm-mlm-tlm-xnli15-1024) against XLMModel / XLMWithLMHead."""
  sizes = dict(vocab_size=95_000, emb_dim=1024, n_layers=12, n_heads=8, n_langs=15)
  with torch.device("meta"):
    model_class = transformers.XLMWithLMHeadModel if part == "lm" else transformers.XLMModel
    theirs = sum(p.numel() for p in model_class(transformers.XLMConfig(**sizes)).parameters())
  config = model_config_from_dict(
    dict(
      family="xlm",
      vocab_size=95_000,
      hidden_size=1024,
      num_layers=12,
      num_heads=8,
      intermediate_size=4096,
      xlm=dict(languages=tuple(f"l{i}" for i in range(15))),
    )
  )
  ids = jnp.zeros((1, 8), jnp.int32)
  shapes = jax.eval_shape(
    lambda: families.get("xlm").pretraining_model(config).init(jax.random.key(0), ids, ids, ids + 1)
  )["params"]
  ours = sum(x.size for x in jax.tree.leaves(shapes if part == "lm" else shapes["bert"]))
  assert ours == theirs == expected
