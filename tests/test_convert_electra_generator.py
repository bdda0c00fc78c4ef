"""A lone ELECTRA generator (``ElectraForMaskedLM``, the electra-*-generator layout) converts.

It becomes an ELECTRA workdir with ``model.electra.lone_generator``: its masked-token logits
and hidden states equal transformers' to 1e-5 with padding, its pretraining objective is the
masked LM alone (the loss equals torch's cross-entropy of the same logits), ``embed`` reads it,
a fine-tuning run starts from it, and the export back is bit-identical.
"""

import json
import pathlib

import jax
import numpy as np
import pytest

from bert_jax.data import default_corpus
from bert_jax.models.electra.model import ElectraEncoder, ElectraForPreTraining
from bert_jax.tasks import electra_pretraining, pretraining
from bert_jax.tools import convert, embed, workdir_params
from bert_jax.train.loop import train_and_evaluate
from tests import finetune_fixtures, helpers, hf_reference, run_helpers

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

# The generator's ElectraConfig fields. "a": embedding width 24 != hidden 32 (it projects, as
# the published generators do), the embedded vocab (embed and fine-tuning read text with it);
# "b": E == H, three segment types, saved as pytorch_model.bin (the tied decoder repeated).
SIZES = {
  "a": dict(
    vocab_size=8192,
    embedding_size=24,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=48,
    max_position_embeddings=40,
  ),
  "b": dict(
    vocab_size=97,
    embedding_size=16,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=24,
    max_position_embeddings=24,
    type_vocab_size=3,
    layer_norm_eps=1e-6,
  ),
}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
  """{name: (ElectraForMaskedLM, HF directory, converted workdir)}."""
  root = tmp_path_factory.mktemp("electra_generator")
  result = {}
  for seed, (name, sizes) in enumerate(SIZES.items()):
    _, generator = hf_reference.random_electra_pair(transformers, torch, seed=7 + seed, **sizes)
    hf_dir, workdir = root / f"hf_{name}", root / f"workdir_{name}"
    generator.save_pretrained(hf_dir, safe_serialization=name != "b")
    if name == "a":
      (hf_dir / "vocab.txt").write_bytes(
        pathlib.Path(default_corpus.default_vocab_path()).read_bytes()
      )
    assert convert.main(["convert", "--from=hf", f"--input={hf_dir}", f"--output={workdir}"]) == 0
    result[name] = (generator, hf_dir, workdir)
  return result


def _torch(model, input_ids, token_types, mask):
  with torch.no_grad():
    return model(
      input_ids=torch.from_numpy(input_ids.astype(np.int64)),
      token_type_ids=torch.from_numpy(token_types.astype(np.int64)),
      attention_mask=torch.from_numpy(mask.astype(np.int64)),
      output_hidden_states=True,
    )


def _close_on_real_tokens(ours, theirs, mask):
  real = mask.astype(bool)  # Padded positions are not compared: neither model defines them.
  np.testing.assert_allclose(np.asarray(ours)[real], np.asarray(theirs)[real], atol=1e-5, rtol=1e-5)


def _assert_equals_transformers(run, generator, seed=0):
  inputs = hf_reference.random_inputs(
    run.model.vocab_size, type_vocab_size=run.model.type_vocab_size, seed=seed
  )
  assert (inputs[2] == 0).any()  # The batch has padding.
  theirs = _torch(generator, *inputs)
  model = ElectraForPreTraining(run.model)
  ours = jax.jit(model.apply)({"params": run.params}, *inputs)
  assert sorted(ours) == ["mlm_logits"]
  _close_on_real_tokens(ours["mlm_logits"], theirs.logits.numpy(), inputs[2])
  hidden, _ = jax.jit(ElectraEncoder(run.model).apply)({"params": run.params["bert"]}, *inputs)
  _close_on_real_tokens(hidden, theirs.hidden_states[-1].numpy(), inputs[2])
  # At masked positions only (how pretraining calls it): the same rows of the same logits.
  positions = np.array([[0, 3, 5], [1, 2, 4], [0, 1, 2]], np.int32)
  at_positions = jax.jit(model.apply)({"params": run.params}, *inputs, positions)["mlm_logits"]
  expected = np.take_along_axis(theirs.logits.numpy(), positions[:, :, None], axis=1)
  np.testing.assert_allclose(at_positions, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["a", "b"])
def test_lone_generator_equals_transformers(converted, name):
  generator, _, workdir = converted[name]
  run = workdir_params.read_run(str(workdir))
  assert sorted(run.params) == ["bert", "generator_head"]
  assert run.model.family == "electra" and run.model.electra.lone_generator
  assert (run.model.hidden_size, run.model.embedding_width) == (
    generator.config.hidden_size,
    generator.config.embedding_size,
  )
  _assert_equals_transformers(run, generator)


def test_pretraining_objective_is_the_masked_lm(converted):
  """The loss of a lone generator is transformers' MLM cross-entropy (no RTD term)."""
  generator, _, workdir = converted["b"]
  run = workdir_params.read_run(str(workdir))
  data = type("Data", (), {"objective": "none", "max_seq_length": 13, "max_predictions_per_seq": 3})
  task = electra_pretraining.make_task(run.model, data)
  assert type(task) is pretraining.PretrainingTask and not task.use_nsp
  batch = task.random_batch(3, seed=4)
  outputs = task.model(deterministic=True).apply({"params": run.params}, *task.model_inputs(batch))
  loss, _ = task.loss_and_sums(outputs, batch, task.denominators(batch))
  theirs = _torch(
    generator, batch["input_ids"], batch["token_type_ids"], batch["input_mask"]
  ).logits
  picked = torch.take_along_dim(
    theirs, torch.from_numpy(batch["masked_lm_positions"]).long()[:, :, None], dim=1
  )
  per_token = torch.nn.functional.cross_entropy(
    picked.reshape(-1, picked.shape[-1]),
    torch.from_numpy(batch["masked_lm_ids"]).long().reshape(-1),
    reduction="none",
  ).numpy()
  weights = batch["masked_lm_weights"].reshape(-1)
  np.testing.assert_allclose(float(loss), (per_token * weights).sum() / weights.sum(), rtol=1e-5)


@pytest.mark.parametrize("name", ["a", "b"])
def test_round_trip_is_bit_identical_and_loads_in_transformers(converted, name, tmp_path):
  generator, _, workdir = converted[name]
  assert convert.main(["convert", "--to=hf", f"--input={workdir}", f"--output={tmp_path}"]) == 0
  config = json.loads((tmp_path / "config.json").read_text())
  assert config["architectures"] == ["ElectraForMaskedLM"] and config["model_type"] == "electra"
  exported = safetensors_numpy.load_file(str(tmp_path / "model.safetensors"))
  original = {
    k: v.numpy() for k, v in generator.state_dict().items() if k != "generator_lm_head.weight"
  }
  assert exported.keys() == original.keys()
  for key, value in original.items():
    assert exported[key].dtype == value.dtype and np.array_equal(exported[key], value), key
  loaded, info = transformers.ElectraForMaskedLM.from_pretrained(
    tmp_path, output_loading_info=True, attn_implementation="eager"
  )
  assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == ([], [], [])
  _assert_equals_transformers(workdir_params.read_run(str(workdir)), loaded.eval(), seed=3)


def test_embed_reads_the_generator(converted, tmp_path):
  generator, _, workdir = converted["a"]
  (tmp_path / "lines.txt").write_text("the cat sat on the mat.\nit ran ||| far away\n")
  argv = [
    "embed",
    f"--checkpoint={workdir}",
    f"--input={tmp_path / 'lines.txt'}",
    f"--output={tmp_path / 'out.npz'}",
    "--layers=-1",
  ]
  assert embed.main(argv) == 0
  out = dict(np.load(tmp_path / "out.npz"))
  mask = (out["input_ids"] > 0).astype(np.int32)
  assert mask.sum() == out["lengths"].sum() > 10
  theirs = _torch(generator, out["input_ids"], out["token_type_ids"], mask).hidden_states[-1]
  _close_on_real_tokens(out["embeddings"][:, 0], theirs.numpy(), mask)


def test_fine_tuning_starts_from_the_generator(converted, tmp_path):
  _, _, workdir = converted["a"]
  config = finetune_fixtures.short_mrpc_config(
    workdir, tmp_path, num_train=16, num_eval=8, steps=2, max_seq_length=32
  )
  metrics = train_and_evaluate(config, str(tmp_path / "run"), helpers.one_device())
  assert 0.0 <= metrics["accuracy"] <= 1.0 and metrics["loss"] > 0, metrics
  model = json.loads((tmp_path / "run" / "config.json").read_text())["model"]
  assert model["family"] == "electra" and model["electra"]["lone_generator"]
  params = run_helpers.restore_params(tmp_path / "run", 2)
  start = workdir_params.read_run(str(workdir)).params
  # The trunk was the generator's at step 0; two steps moved it only a little.
  for key in ("bert/embeddings/word_embeddings/embedding", "bert/encoder/layer_1/output/kernel"):
    ours = params[key]
    theirs = start
    for part in key.split("/"):
      theirs = theirs[part]
    assert ours.shape == theirs.shape and 0 < np.abs(ours - theirs).max() < 0.05, key


def test_generator_as_input_with_generator_flag_is_one_line_error(converted, tmp_path, capsys):
  _, hf_dir, _ = converted["b"]
  argv = [
    "convert",
    "--from=hf",
    f"--input={hf_dir}",
    f"--generator={hf_dir}",
    f"--output={tmp_path / 'out'}",
  ]
  assert convert.main(argv) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "is an ELECTRA generator (ElectraForMaskedLM)" in err[0], err
  assert not (tmp_path / "out").exists()
