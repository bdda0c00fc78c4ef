"""tools/convert: Hugging Face <-> bert_jax, checked against transformers' own PyTorch BERT."""

import json
import pathlib
import shutil
import sys

import flax.linen as nn
import jax
import numpy as np
import pytest

from bert_jax.data import default_corpus
from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.bert.model import BertEncoder, BertForPreTraining
from bert_jax.models.distilbert.model import DistilBertEncoder
from bert_jax.models.families import model_config_from_dict
from bert_jax.models.interop import weight_table
from bert_jax.tools import convert, workdir_params
from bert_jax.train.loop import train_and_evaluate
from tests import helpers, hf_reference, run_helpers

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

# Two sizes and two vocabs; the second also carries a non-default LayerNorm epsilon and three
# segment types, and is saved as pytorch_model.bin (tied decoder tensors repeated).
SIZES = {
  "a": {
    "vocab_size": 211,
    "hidden_size": 64,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "intermediate_size": 96,
    "max_position_embeddings": 40,
  },
  "b": {
    "vocab_size": 97,
    "hidden_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 3,
    "intermediate_size": 80,
    "max_position_embeddings": 24,
    "type_vocab_size": 3,
    "layer_norm_eps": 1e-6,
  },
}
# DistilBERT of two sizes and vocabs ("e" saved as pytorch_model.bin, projector repeated), and
# "f", a DistilBertModel (no prefix, no head).
DISTILBERT_SIZES = {
  "d": {
    "vocab_size": 173,
    "dim": 48,
    "n_layers": 3,
    "n_heads": 4,
    "hidden_dim": 72,
    "max_position_embeddings": 32,
  },
  "e": {
    "vocab_size": 89,
    "dim": 36,
    "n_layers": 2,
    "n_heads": 3,
    "hidden_dim": 60,
    "max_position_embeddings": 20,
  },
}
DISTILBERT_KINDS = {"d": ("d", "mlm"), "e": ("e", "mlm"), "f": ("d", "model")}
VOCAB_A = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(206)]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
  """{name: (torch model, HF dir, converted workdir)}; also "c", a BertModel checkpoint."""
  root = tmp_path_factory.mktemp("convert")
  models = {
    "a": hf_reference.random_bert(transformers, torch, seed=1, **SIZES["a"]),
    "b": hf_reference.random_bert(transformers, torch, seed=2, **SIZES["b"]),
    "c": hf_reference.random_bert(transformers, torch, kind="model", seed=3, **SIZES["a"]),
  }
  for seed, (name, (size, kind)) in enumerate(DISTILBERT_KINDS.items(), start=6):
    models[name] = hf_reference.random_distilbert(
      transformers, torch, kind=kind, seed=seed, **DISTILBERT_SIZES[size]
    )
  result = {}
  for name, model in models.items():
    hf_dir, workdir = root / f"hf_{name}", root / f"workdir_{name}"
    model.save_pretrained(hf_dir, safe_serialization=name not in ("b", "e"))
    if name == "a":
      (hf_dir / "vocab.txt").write_text("\n".join(VOCAB_A) + "\n")
      (hf_dir / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    assert convert.main(["convert", "--from=hf", f"--input={hf_dir}", f"--output={workdir}"]) == 0
    result[name] = (model, hf_dir, workdir)
  return result


def _apply(module, params, *inputs):
  return jax.jit(module.apply)({"params": params}, *inputs)


def _assert_close_on_real_tokens(ours, theirs, mask):
  real = mask.astype(bool)  # Padded positions are not compared: neither model defines them.
  np.testing.assert_allclose(np.asarray(ours)[real], np.asarray(theirs)[real], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["a", "b"])
def test_converted_model_equals_transformers(converted, name):
  model, _, workdir = converted[name]
  run = workdir_params.read_run(str(workdir))
  assert sorted(run.params) == ["bert", "mlm_head", "nsp_head"]
  assert run.model.layer_norm_eps == model.config.layer_norm_eps
  assert run.model.type_vocab_size == model.config.type_vocab_size
  inputs = hf_reference.random_inputs(
    run.model.vocab_size, type_vocab_size=run.model.type_vocab_size
  )
  reference = hf_reference.torch_outputs(torch, model, *inputs)
  hidden, _ = _apply(BertEncoder(run.model), run.params["bert"], *inputs)
  logits = _apply(BertForPreTraining(run.model), run.params, *inputs)
  _assert_close_on_real_tokens(hidden, reference["hidden_states"][-1], inputs[2])
  _assert_close_on_real_tokens(logits["mlm_logits"], reference["mlm_logits"], inputs[2])
  np.testing.assert_allclose(logits["nsp_logits"], reference["nsp_logits"], atol=1e-5, rtol=1e-5)


def test_bert_model_checkpoint_without_prefix_or_heads(converted):
  model, hf_dir, workdir = converted["c"]
  assert not any(
    name.startswith("bert.")
    for name in safetensors_numpy.load_file(str(hf_dir / "model.safetensors"))
  )
  run = workdir_params.read_run(str(workdir))
  assert sorted(run.params) == ["bert"]
  inputs = hf_reference.random_inputs(run.model.vocab_size)
  with torch.no_grad():
    reference = model(
      *(torch.from_numpy(x.astype(np.int64)) for x in (inputs[0], inputs[2], inputs[1]))
    )
  hidden, pooled = _apply(BertEncoder(run.model), run.params["bert"], *inputs)
  _assert_close_on_real_tokens(hidden, reference.last_hidden_state.numpy(), inputs[2])
  np.testing.assert_allclose(pooled, reference.pooler_output.numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["a", "b", "c", "d", "e", "f"])
def test_round_trip_gives_identical_tensors(converted, name, tmp_path):
  model, _, workdir = converted[name]
  assert convert.main(["convert", "--to=hf", f"--input={workdir}", f"--output={tmp_path}"]) == 0
  exported = safetensors_numpy.load_file(str(tmp_path / "model.safetensors"))
  tied = {
    "cls.predictions.decoder.weight",
    "cls.predictions.decoder.bias",
    "vocab_projector.weight",
  }
  original = {k: v.numpy() for k, v in model.state_dict().items() if k not in tied}
  # BertModel / DistilBertModel names gain the prefix of the classes with heads.
  prefix = {"c": "bert.", "f": "distilbert."}.get(name, "")
  original = {f"{prefix}{k}": v for k, v in original.items()}
  assert exported.keys() == original.keys()
  for key, value in original.items():
    assert exported[key].dtype == value.dtype and np.array_equal(exported[key], value), key


def test_transformers_loads_the_export_as_bert_model_and_pretraining(converted, tmp_path):
  _, _, workdir = converted["a"]
  assert (
    convert.main(["convert", "--to=hf", f"--input={workdir}/checkpoints/0", f"--output={tmp_path}"])
    == 0
  )
  pretraining, info = transformers.BertForPreTraining.from_pretrained(
    tmp_path, output_loading_info=True, attn_implementation="eager"
  )
  assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == ([], [], [])
  encoder, info = transformers.BertModel.from_pretrained(tmp_path, output_loading_info=True)
  assert info["missing_keys"] == [] and info["mismatched_keys"] == []
  tokenizer = transformers.BertTokenizerFast.from_pretrained(tmp_path)
  # The source's tokenizer_config.json said cased: "W7" is not "w7" (id 12).
  assert tokenizer("W7 w7", add_special_tokens=False)["input_ids"] == [1, 12]

  run = workdir_params.read_run(str(workdir))
  inputs = hf_reference.random_inputs(run.model.vocab_size, seed=5)
  reference = hf_reference.torch_outputs(torch, pretraining.eval(), *inputs)
  logits = _apply(BertForPreTraining(run.model), run.params, *inputs)
  _assert_close_on_real_tokens(logits["mlm_logits"], reference["mlm_logits"], inputs[2])
  with torch.no_grad():
    pooled = encoder.eval()(
      *(torch.from_numpy(x.astype(np.int64)) for x in (inputs[0], inputs[2], inputs[1]))
    ).pooler_output.numpy()
  _, ours = _apply(BertEncoder(run.model), run.params["bert"], *inputs)
  np.testing.assert_allclose(ours, pooled, atol=1e-5, rtol=1e-5)


def test_safetensors_need_no_torch_and_bin_files_say_they_do(
  converted, tmp_path, monkeypatch, capsys
):
  monkeypatch.setitem(sys.modules, "torch", None)  # Any `import torch` now fails.
  _, hf_a, _ = converted["a"]
  assert (
    convert.main(["convert", "--from=hf", f"--input={hf_a}", f"--output={tmp_path / 'a'}"]) == 0
  )
  _, hf_b, _ = converted["b"]
  assert (
    convert.main(["convert", "--from=hf", f"--input={hf_b}", f"--output={tmp_path / 'b'}"]) == 2
  )
  assert "reading it needs torch, which is not installed" in capsys.readouterr().err
  assert not (tmp_path / "b").exists()


def test_converted_workdir_initialises_a_pretraining_run(tmp_path, small_corpus_keys):
  config = helpers.small_config(
    num_train_steps=1,
    checkpoint_every_steps=1,
    eval_every_steps=100,
    peak_flops_per_device=1e12,
    **{  # A fixed peak: no matmul benchmark for the MFU.
      "model.num_layers": 1,
      "model.hidden_size": 32,
      "model.num_heads": 2,
      "model.intermediate_size": 64,
      "model.max_position_embeddings": 16,
      "data.max_seq_length": 16,
      "data.max_predictions_per_seq": 3,
      "data.num_eval_examples": 8,
      "optimizer.warmup_steps": 5,
      **small_corpus_keys,  # The weights matter, not the data.
    },
  )
  hf_model = hf_reference.random_bert(
    transformers,
    torch,
    seed=4,
    vocab_size=config.model.vocab_size,
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=16,
  )
  hf_model.save_pretrained(tmp_path / "hf")
  assert (
    convert.main(
      ["convert", "--from=hf", f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'converted'}"]
    )
    == 0
  )
  config.init_from = str(tmp_path / "converted")
  train_and_evaluate(config, str(tmp_path / "run"), helpers.one_device())
  # The converted directory is a start point, not a run to resume; its files stay as they are.
  written = (tmp_path / "converted" / "config.json").read_text()
  with pytest.raises(UserInputError, match="holds converted weights.*--config.init_from="):
    train_and_evaluate(config, str(tmp_path / "converted"), helpers.one_device())
  assert (tmp_path / "converted" / "config.json").read_text() == written
  # The first update has learning rate 0 (warmup), so step 1 holds the converted params.
  converted_params = run_helpers.restore_params(tmp_path / "converted", 0)
  trained = run_helpers.restore_params(tmp_path / "run", 1)
  assert converted_params.keys() == trained.keys()
  for name, value in converted_params.items():
    np.testing.assert_array_equal(trained[name], value, err_msg=name)

  # Exported again, the pretraining run is the original Hugging Face model, with its vocab.
  assert (
    convert.main(
      ["convert", "--to=hf", f"--input={tmp_path / 'run'}", f"--output={tmp_path / 'back'}"]
    )
    == 0
  )
  original = safetensors_numpy.load_file(str(tmp_path / "hf" / "model.safetensors"))
  back = safetensors_numpy.load_file(str(tmp_path / "back" / "model.safetensors"))
  assert original.keys() == back.keys()
  for name, value in original.items():
    np.testing.assert_array_equal(back[name], value, err_msg=name)
  assert (tmp_path / "back" / "vocab.txt").read_text() == pathlib.Path(
    default_corpus.default_vocab_path()
  ).read_text()


def test_scanned_layers_unstack_into_the_table_layout():
  config = model_config_from_dict(
    {
      "vocab_size": 30,
      "hidden_size": 16,
      "num_layers": 3,
      "num_heads": 2,
      "intermediate_size": 24,
      "max_position_embeddings": 8,
      "scan_layers": True,
    }
  )
  ids = np.zeros((1, 4), np.int32)
  params = nn.unbox(
    jax.jit(BertForPreTraining(config).init)(jax.random.key(0), ids, ids, ids + 1)["params"]
  )
  flat = weight_table.flatten(weight_table.unscanned(params, config))
  assert {k: v.shape for k, v in flat.items()} == weight_table.param_shapes(
    BertForPreTraining, config
  )
  stacked = params["bert"]["encoder"]["layers"]["block"]["output"]["kernel"]
  for i in range(3):
    np.testing.assert_array_equal(flat[f"bert/encoder/layer_{i}/output/kernel"], stacked[i])


def _edit_config(directory, **changes):
  config = json.loads((directory / "config.json").read_text())
  config.update(changes)
  (directory / "config.json").write_text(json.dumps(config))


def _edit_tensors(directory, drop=(), add=()):
  path = str(directory / "model.safetensors")
  tensors = safetensors_numpy.load_file(path)
  for name in drop:
    del tensors[name]
  for name in add:
    tensors[name] = np.zeros((2, 3), np.float32)
  safetensors_numpy.save_file(tensors, path, metadata={"format": "pt"})


def _truncate(path, keep=0.5):
  data = path.read_bytes()
  path.write_bytes(data[: int(len(data) * keep)])


BAD_HF_DIRS = {
  "no_dir": (lambda d: shutil.rmtree(d), "is not a directory"),
  "no_config": (lambda d: (d / "config.json").unlink(), "config.json does not exist"),
  "no_weights": (
    lambda d: (d / "model.safetensors").unlink(),
    "holds neither model.safetensors nor pytorch_model.bin",
  ),
  "deberta": (
    lambda d: _edit_config(d, model_type="deberta"),
    "describes a 'deberta' model; convert handles model_type bert",
  ),
  "tanh_gelu": (
    lambda d: _edit_config(d, hidden_act="gelu_new"),
    "hidden_act='gelu_new'; bert_jax's BERT uses the exact (erf) GELU",
  ),
  "relative_positions": (
    lambda d: _edit_config(d, position_embedding_type="relative_key"),
    "position_embedding_type='relative_key'",
  ),
  "corrupted": (lambda d: _truncate(d / "model.safetensors"), "is not a readable safetensors file"),
  "vocab_mismatch": (
    lambda d: _edit_config(d, vocab_size=300),
    (
      "2 of another shape than the config implies (bert.embeddings."
      "word_embeddings.weight (211, 64), config: (300, 64); "
      "cls.predictions.bias (211,), config: (300,))"
    ),
  ),
  "missing_and_unexpected": (
    lambda d: _edit_tensors(
      d, drop=["bert.encoder.layer.2.output.dense.weight"], add=["classifier.weight"]
    ),
    (
      "tensors 1 missing (bert.encoder.layer.2.output.dense.weight); 1 unexpected "
      "(classifier.weight)"
    ),
  ),
  "partial_head": (
    lambda d: _edit_tensors(d, drop=["cls.seq_relationship.bias"]),
    "1 missing (cls.seq_relationship.bias)",
  ),
}


@pytest.mark.parametrize("case", sorted(BAD_HF_DIRS))
def test_bad_hugging_face_input_fails_with_one_line(converted, tmp_path, capsys, case):
  damage, expected = BAD_HF_DIRS[case]
  hf_dir = tmp_path / "hf"
  shutil.copytree(converted["a"][1], hf_dir)
  damage(hf_dir)
  output = tmp_path / "out"
  assert convert.main(["convert", "--from=hf", f"--input={hf_dir}", f"--output={output}"]) == 2
  errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and expected in errors[0], errors
  assert not output.exists()


@pytest.mark.parametrize(
  "flags,expected",
  [
    (["--from=hf", "--to=hf"], "pass exactly one of --from=hf|tf"),
    (["--from=xml"], "value should be one of <hf|tf>"),
    (["--from=hf", "--output=OUT"], "--input is required"),
    (["--to=hf", "--input=TMP/nothing"], "TMP/nothing does not exist"),
    (["--to=hf", "--input=TMP"], "holds no checkpoint"),
    (
      ["--from=tf", "--input=TMP/bert_model.ckpt", "--bert_config=HF/config.json"],
      "no readable TF checkpoint at --input=TMP/bert_model.ckpt",
    ),
    (["--from=tf", "--input=TMP/bert_model.ckpt"], "--from=tf needs --bert_config"),
    (["--from=hf", "--input=HF", "--output=WORKDIR"], "exists and is not empty; pass --overwrite"),
  ],
)
def test_bad_flags_fail_with_one_line(converted, tmp_path, capsys, flags, expected):
  _, hf_dir, workdir = converted["a"]
  names = {
    "TMP": str(tmp_path),
    "HF": str(hf_dir),
    "WORKDIR": str(workdir),
    "OUT": str(tmp_path / "out"),
  }
  argv = []
  for flag in flags:
    for placeholder, value in names.items():
      flag = flag.replace(placeholder, value)
    argv.append(flag)
  if not any(flag.startswith("--output") for flag in argv):
    argv.append(f"--output={tmp_path / 'out'}")
  assert convert.main(["convert", *argv]) == 2
  errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and expected.replace("TMP", str(tmp_path)) in errors[0], errors


def test_overwrite_replaces_the_output(converted, tmp_path):
  _, hf_dir, _ = converted["c"]
  (tmp_path / "checkpoints" / "7").mkdir(parents=True)  # A stale run that must disappear.
  assert (
    convert.main(
      ["convert", "--from=hf", f"--input={hf_dir}", f"--output={tmp_path}", "--overwrite"]
    )
    == 0
  )
  assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["0"]


@pytest.mark.parametrize("name", ["d", "e"])
def test_converted_distilbert_equals_transformers(converted, name):
  model, _, workdir = converted[name]
  run = workdir_params.read_run(str(workdir))
  assert sorted(run.params) == ["bert", "mlm_head"] and run.model.family == "distilbert"
  inputs = hf_reference.random_inputs(run.model.vocab_size, length=11)
  reference = hf_reference.torch_outputs(torch, model, *inputs)
  family = families.get(run.model.family)
  # Token types are random here: DistilBERT must ignore them, as Hugging Face's has none.
  hidden, _ = _apply(family.encoder(run.model, with_pooler=False), run.params["bert"], *inputs)
  logits = _apply(family.pretraining_model(run.model), run.params, *inputs)["mlm_logits"]
  _assert_close_on_real_tokens(hidden, reference["hidden_states"][-1], inputs[2])
  _assert_close_on_real_tokens(logits, reference["mlm_logits"], inputs[2])


def test_distilbert_model_checkpoint_and_export_load_in_transformers(converted, tmp_path):
  model, _, workdir = converted["f"]
  run = workdir_params.read_run(str(workdir))
  assert sorted(run.params) == ["bert"]
  inputs = hf_reference.random_inputs(run.model.vocab_size, seed=3)
  reference = hf_reference.torch_outputs(torch, model, *inputs)
  hidden, _ = _apply(DistilBertEncoder(run.model, with_pooler=False), run.params["bert"], *inputs)
  _assert_close_on_real_tokens(hidden, reference["hidden_states"][-1], inputs[2])
  for name, classes in (
    ("d", (transformers.DistilBertForMaskedLM, transformers.DistilBertModel)),
    ("f", (transformers.DistilBertModel,)),
  ):
    exported = tmp_path / name
    assert (
      convert.main(["convert", "--to=hf", f"--input={converted[name][2]}", f"--output={exported}"])
      == 0
    )
    for model_class in classes:
      _, info = model_class.from_pretrained(exported, output_loading_info=True)
      assert info["missing_keys"] == [] and info["mismatched_keys"] == [], (name, model_class)
      # Only the bare encoder may leave tensors out: the MLM head it has no place for.
      unexpected = {key.split(".")[0] for key in info["unexpected_keys"]}
      assert unexpected <= {"vocab_transform", "vocab_layer_norm", "vocab_projector"}
      assert bool(unexpected) == (model_class is transformers.DistilBertModel and name == "d")


@pytest.mark.parametrize(
  "change,expected",
  [
    ({"sinusoidal_pos_embds": True}, "sinusoidal_pos_embds=True"),
    ({"activation": "relu"}, "activation='relu'"),
    ({"model_type": "gpt2"}, "describes a 'gpt2' model; convert handles model_type bert"),
  ],
)
def test_unsupported_distilbert_configs_fail_with_one_line(
  converted, tmp_path, capsys, change, expected
):
  hf_dir = tmp_path / "hf"
  shutil.copytree(converted["d"][1], hf_dir)
  _edit_config(hf_dir, **change)
  assert convert.main(["convert", "--from=hf", f"--input={hf_dir}", f"--output={tmp_path}/o"]) == 2
  errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and expected in errors[0], errors
