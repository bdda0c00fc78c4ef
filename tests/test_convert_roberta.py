"""RoBERTa and XLM-R: convert both ways equals transformers (outputs and gradients, with
padding), round trips are bitwise, the vocab travels, and embed / GLUE fine-tuning run on the
converted model with no model flags."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.data import bpe_tokenization, default_corpus, tokenization
from bert_jax.models import families
from bert_jax.models.families import model_config_from_dict
from bert_jax.models.roberta import hf as roberta_hf
from bert_jax.models.roberta.model import RobertaEncoder, RobertaForMaskedLM
from bert_jax.models.roberta.options import RobertaOptions
from bert_jax.tools import convert, embed, train_vocab, workdir_params
from bert_jax.train.loop import train_and_evaluate
from tests import finetune_fixtures, helpers, hf_reference, run_helpers

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

VOCAB_SIZE = 600
SIZE = {
  "vocab_size": VOCAB_SIZE,
  "hidden_size": 32,
  "num_hidden_layers": 2,
  "num_attention_heads": 4,
  "intermediate_size": 48,
  "max_position_embeddings": 66,  # 64 tokens past the padding index.
  "type_vocab_size": 1,
}
# name: (transformers class stem, kind, saved as safetensors, with its tokenizer files).
MODELS = {
  "roberta_mlm": ("Roberta", "mlm", True, True),
  "roberta_model": ("Roberta", "model", False, False),
  "xlmr_mlm": ("XLMRoberta", "mlm", False, True),
  "xlmr_model": ("XLMRoberta", "model", True, False),
}


@pytest.fixture(scope="module")
def vocabs(tmp_path_factory):
  """{"Roberta": vocab.json, "XLMRoberta": sentencepiece.bpe.model} trained on the corpus."""
  root = tmp_path_factory.mktemp("vocabs")
  with open(default_corpus.default_corpus_path(), encoding="utf-8") as f:
    (root / "text.txt").write_text(f.read(200_000), encoding="utf-8")
  text = str(root / "text.txt")
  paths = {"Roberta": str(root / "bpe" / "vocab.json")}
  paths["XLMRoberta"] = str(root / "spm" / "sentencepiece.bpe.model")
  train_vocab.train(inputs=text, output=paths["Roberta"], kind="bytelevel_bpe", vocab_size=600)
  train_vocab.train(
    inputs=text, output=paths["XLMRoberta"], kind="xlmr_sentencepiece", vocab_size=600
  )
  return paths


def _hf_tokenizer(stem, vocab):
  if stem == "Roberta":
    merges = bpe_tokenization.merges_path(vocab)
    return transformers.RobertaTokenizerFast(vocab_file=vocab, merges_file=merges)
  return transformers.XLMRobertaTokenizerFast(vocab_file=vocab)


@pytest.fixture(scope="module")
def converted(vocabs, tmp_path_factory):
  """{name: (torch model, HF dir, converted workdir)}."""
  root = tmp_path_factory.mktemp("convert_roberta")
  result = {}
  for seed, (name, (stem, kind, safe, with_vocab)) in enumerate(MODELS.items()):
    model = hf_reference.random_roberta(
      transformers, torch, stem=stem, kind=kind, seed=seed, **SIZE
    )
    hf_dir, workdir = root / f"hf_{name}", root / f"workdir_{name}"
    model.save_pretrained(hf_dir, safe_serialization=safe)
    if with_vocab:
      _hf_tokenizer(stem, vocabs[stem]).save_pretrained(hf_dir)
    assert convert.main(["convert", "--from=hf", f"--input={hf_dir}", f"--output={workdir}"]) == 0
    result[name] = (model, hf_dir, workdir)
  return result


def _inputs(seed=0):
  return hf_reference.random_inputs(VOCAB_SIZE, type_vocab_size=1, seed=seed, pad_id=1)


def _close_on_real_tokens(ours, theirs, mask):
  real = mask.astype(bool)  # Padded positions are not compared: neither model defines them.
  np.testing.assert_allclose(np.asarray(ours)[real], np.asarray(theirs)[real], atol=1e-5, rtol=1e-5)


def _torch(*arrays):
  return [torch.from_numpy(a.astype(np.int64)) for a in arrays]


@pytest.mark.parametrize("name", list(MODELS))
def test_converted_model_equals_transformers(converted, name):
  model, _, workdir = converted[name]
  run = workdir_params.read_run(str(workdir))
  family = "roberta" if name.startswith("roberta") else "xlm_roberta"
  assert run.model.family == family and run.model.type_vocab_size == 1
  kind = MODELS[name][1]
  assert sorted(run.params) == (["bert", "mlm_head"] if kind == "mlm" else ["bert"])
  assert ("pooler" in run.params["bert"]) == (kind == "model")
  input_ids, token_types, mask = _inputs()
  reference = hf_reference.torch_outputs(torch, model, input_ids, token_types, mask)
  # Segment ids of 1 are ignored (one type), as Hugging Face's tokenizers never make them.
  hidden, pooled = jax.jit(RobertaEncoder(run.model).apply)(
    {"params": run.params["bert"]}, input_ids, np.ones_like(token_types), mask
  )
  _close_on_real_tokens(hidden, reference["hidden_states"][-1], mask)
  if kind == "mlm":
    assert pooled is None  # RobertaForMaskedLM has no pooler.
    logits = jax.jit(RobertaForMaskedLM(run.model).apply)(
      {"params": run.params}, input_ids, token_types, mask
    )
    _close_on_real_tokens(logits["mlm_logits"], reference["mlm_logits"], mask)
  else:
    with torch.no_grad():
      theirs = model(*_torch(input_ids, mask)).pooler_output.numpy()
    np.testing.assert_allclose(pooled, theirs, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["roberta_mlm", "xlmr_model"])
def test_gradients_equal_transformers(converted, name):
  """d(weighted outputs on real tokens)/d(params) equals torch's, tensor by tensor."""
  model, _, workdir = converted[name]
  run = workdir_params.read_run(str(workdir))
  input_ids, token_types, mask = _inputs(seed=3)
  rng = np.random.default_rng(0)
  width = VOCAB_SIZE if MODELS[name][1] == "mlm" else SIZE["hidden_size"]
  weights = (rng.normal(size=(*input_ids.shape, width)) * mask[:, :, None]).astype(np.float32)
  pooled_weights = rng.normal(size=(input_ids.shape[0], SIZE["hidden_size"])).astype(np.float32)

  def objective(params):
    if MODELS[name][1] == "mlm":
      out = RobertaForMaskedLM(run.model).apply({"params": params}, input_ids, token_types, mask)
      return jnp.sum(out["mlm_logits"] * weights)
    hidden, pooled = RobertaEncoder(run.model).apply(
      {"params": params["bert"]}, input_ids, token_types, mask
    )
    return jnp.sum(hidden * weights) + jnp.sum(pooled * pooled_weights)

  ours = jax.jit(jax.grad(objective))(run.params)
  model.zero_grad()
  out = model(*_torch(input_ids, mask))
  if MODELS[name][1] == "mlm":
    loss = (out.logits * torch.from_numpy(weights)).sum()
  else:
    loss = (out.last_hidden_state * torch.from_numpy(weights)).sum() + (
      out.pooler_output * torch.from_numpy(pooled_weights)
    ).sum()
  loss.backward()
  grads = {n: p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None}
  theirs = roberta_hf.params_from_hf(grads, run.model)
  hf_reference.assert_gradients_equal(ours, theirs)
  assert len(jax.tree.leaves(ours)) > 20  # Every tensor of the model, not a few.


@pytest.mark.parametrize("name", list(MODELS))
def test_round_trip_is_bitwise_and_transformers_loads_it(converted, name, tmp_path):
  model, _, workdir = converted[name]
  stem, kind, _, with_vocab = MODELS[name]
  assert convert.main(["convert", "--to=hf", f"--input={workdir}", f"--output={tmp_path}"]) == 0
  exported = safetensors_numpy.load_file(str(tmp_path / "model.safetensors"))
  tied = {"lm_head.decoder.weight", "lm_head.decoder.bias"}
  prefix = "roberta." if kind == "model" else ""  # *Model names gain the prefix.
  original = {f"{prefix}{k}": v.numpy() for k, v in model.state_dict().items() if k not in tied}
  assert exported.keys() == original.keys()
  for key, value in original.items():
    assert exported[key].dtype == value.dtype and np.array_equal(exported[key], value), key
  model_class = getattr(transformers, f"{stem}ForMaskedLM" if kind == "mlm" else f"{stem}Model")
  loaded, info = model_class.from_pretrained(tmp_path, output_loading_info=True)
  assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == ([], [], [])
  assert json.loads((tmp_path / "config.json").read_text())["architectures"] == [
    model_class.__name__
  ]
  if with_vocab:  # The tokenizer travelled: HF dir -> workdir -> HF dir.
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path)
    ours = tokenization.load_tokenizer(
      workdir_params.run_vocab(workdir_params.read_run(str(workdir)))[0]
    )
    text = "The history of the region, as written in 1911."
    assert tokenizer(text)["input_ids"] == ours.with_special_tokens(ours.encode(text))[0]
  assert (
    convert.main(["convert", "--from=hf", f"--input={tmp_path}", f"--output={tmp_path / 'b'}"]) == 0
  )
  first = jax.tree.leaves(workdir_params.read_run(str(workdir)).params)
  second = jax.tree.leaves(workdir_params.read_run(str(tmp_path / "b")).params)
  assert len(first) == len(second) and all(np.array_equal(a, b) for a, b in zip(first, second))


def _param_count(family, size, vocab_size, part):
  config = model_config_from_dict(
    {
      "family": family,
      "size": size,
      "vocab_size": vocab_size,
      "max_position_embeddings": 514,
      "type_vocab_size": 1,
      "layer_norm_eps": 1e-5,
    }
  )
  ids = jnp.zeros((1, 8), jnp.int32)
  module = families.get(family)
  if part == "model":  # The encoder with its pooler: RobertaModel.
    shapes = jax.eval_shape(
      lambda: module.encoder(config).init(jax.random.key(0), ids, ids, ids + 1)
    )
  else:
    shapes = jax.eval_shape(
      lambda: module.pretraining_model(config).init(jax.random.key(0), ids, ids, ids + 1)
    )
  return sum(x.size for x in jax.tree.leaves(shapes))


@pytest.mark.parametrize(
  "family,size,vocab_size,part,expected",
  [
    ("roberta", "base", 50265, "model", 124_645_632),
    ("roberta", "large", 50265, "model", 355_359_744),
    ("roberta", "base", 50265, "mlm", 124_697_433),
    ("roberta", "large", 50265, "mlm", 355_412_057),
    ("xlm_roberta", "base", 250002, "model", 278_043_648),
    ("xlm_roberta", "base", 250002, "mlm", 278_295_186),
  ],
)
def test_parameter_counts_equal_transformers(family, size, vocab_size, part, expected):
  assert _param_count(family, size, vocab_size, part) == expected


@pytest.mark.parametrize("pad", [0, 3])
def test_another_padding_index_converts_and_equals_transformers(pad, tmp_path):
  """transformers counts positions past the config's pad_token_id; so does the converted model
  (outputs and gradients), both ways (the index travels as model.roberta.padding_idx and back
  as pad_token_id)."""
  model = hf_reference.random_roberta(
    transformers, torch, kind="model", seed=7, pad_token_id=pad, **SIZE
  )
  model.save_pretrained(tmp_path / "hf")
  workdir = tmp_path / "workdir"
  argv = ["convert", "--from=hf", f"--input={tmp_path / 'hf'}", f"--output={workdir}"]
  assert convert.main(argv) == 0
  run = workdir_params.read_run(str(workdir))
  assert run.model.roberta.padding_idx == pad
  input_ids, token_types, mask = hf_reference.random_inputs(
    VOCAB_SIZE, type_vocab_size=1, seed=5, pad_id=pad
  )
  reference = hf_reference.torch_outputs(torch, model, input_ids, token_types, mask)
  hidden, pooled = jax.jit(RobertaEncoder(run.model).apply)(
    {"params": run.params["bert"]}, input_ids, token_types, mask
  )
  _close_on_real_tokens(hidden, reference["hidden_states"][-1], mask)
  with torch.no_grad():
    theirs = model(*_torch(input_ids, mask)).pooler_output.numpy()
  np.testing.assert_allclose(pooled, theirs, atol=1e-5, rtol=1e-5)
  # Gradients too: d(weighted outputs on real tokens)/d(params).
  rng = np.random.default_rng(1)
  weights = (rng.normal(size=hidden.shape) * mask[:, :, None]).astype(np.float32)
  pooled_weights = rng.normal(size=pooled.shape).astype(np.float32)

  def objective(params):
    out, first = RobertaEncoder(run.model).apply({"params": params}, input_ids, token_types, mask)
    return jnp.sum(out * weights) + jnp.sum(first * pooled_weights)

  ours = jax.jit(jax.grad(objective))(run.params["bert"])
  model.zero_grad()
  out = model(*_torch(input_ids, mask))
  loss = (out.last_hidden_state * torch.from_numpy(weights)).sum()
  (loss + (out.pooler_output * torch.from_numpy(pooled_weights)).sum()).backward()
  grads = {n: p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None}
  hf_reference.assert_gradients_equal(ours, roberta_hf.params_from_hf(grads, run.model)["bert"])
  # Index 1's positions would differ: the parity above is the padding index's doing.
  shifted = run.model.with_sections(roberta=RobertaOptions(padding_idx=1))
  other, _ = RobertaEncoder(shifted).apply(
    {"params": run.params["bert"]}, input_ids, token_types, mask
  )
  assert not np.allclose(np.asarray(other)[mask == 1], np.asarray(hidden)[mask == 1], atol=1e-3)
  assert (
    convert.main(["convert", "--to=hf", f"--input={workdir}", f"--output={tmp_path / 'back'}"]) == 0
  )
  exported = json.loads((tmp_path / "back" / "config.json").read_text())
  assert exported["pad_token_id"] == pad
  loaded = transformers.RobertaModel.from_pretrained(tmp_path / "back").eval()
  with torch.no_grad():
    again = loaded(*_torch(input_ids, mask)).last_hidden_state.numpy()
  _close_on_real_tokens(again, reference["hidden_states"][-1], mask)


def test_a_padding_index_past_the_positions_is_one_line(converted, tmp_path, capsys):
  _, hf_dir, _ = converted["roberta_model"]
  for path in hf_dir.iterdir():
    (tmp_path / "hf" / path.name).parent.mkdir(exist_ok=True)
    (tmp_path / "hf" / path.name).write_bytes(path.read_bytes())
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  (tmp_path / "hf" / "config.json").write_text(json.dumps(dict(config, pad_token_id=65)))
  argv = ["convert", "--from=hf", f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'o'}"]
  assert convert.main(argv) == 2
  err = capsys.readouterr().err.strip()
  assert "pad_token_id=65" in err and "max_position_embeddings" in err and "\n" not in err
  assert families.for_config_json({"model_type": "xlm-roberta"}, "x").name == "xlm_roberta"


def test_embed_reads_a_converted_roberta(converted, tmp_path):
  model, _, workdir = converted["roberta_mlm"]
  (tmp_path / "lines.txt").write_text("The river flows north.\nA city ||| in the valley.\n")
  argv = [
    "embed",
    f"--checkpoint={workdir}",
    f"--input={tmp_path / 'lines.txt'}",
    f"--output={tmp_path / 'e.npz'}",
    "--layers=-1",
  ]
  assert embed.main(argv) == 0
  arrays = np.load(tmp_path / "e.npz")
  ids, lengths = arrays["input_ids"], arrays["lengths"]
  pair = ids[1, : lengths[1]].tolist()
  assert pair[0] == 0 and pair[-1] == 2 and [2, 2] in [pair[i : i + 2] for i in range(len(pair))]
  # Transformers on the same ids (padding with <pad>) gives the same last hidden states.
  mask = (np.arange(ids.shape[1])[None] < lengths[:, None]).astype(np.int32)
  with torch.no_grad():
    theirs = model.roberta(*_torch(np.where(mask == 1, ids, 1), mask)).last_hidden_state.numpy()
  _close_on_real_tokens(arrays["embeddings"][:, 0], theirs, mask)


def test_glue_fine_tuning_from_a_converted_roberta_takes_its_model(converted, tmp_path):
  _, _, workdir = converted["roberta_mlm"]
  config = finetune_fixtures.short_mrpc_config(
    workdir, tmp_path, num_train=32, num_eval=16, steps=4
  )
  metrics = train_and_evaluate(config, str(tmp_path / "run"), helpers.one_device())
  assert 0.0 <= metrics["accuracy"] <= 1.0 and np.isfinite(metrics["loss"]), metrics
  model = json.loads((tmp_path / "run" / "config.json").read_text())["model"]
  stored = json.loads((workdir / "config.json").read_text())["model"]
  assert model == stored and model["family"] == "roberta"
  params = run_helpers.restore_params(tmp_path / "run", 4)
  converted_params = workdir_params.read_run(str(workdir)).params
  assert "bert/pooler/kernel" in params  # A fresh pooler for the classifier.
  assert params["bert/embeddings/position_embeddings/embedding"].shape == (66, 32)
  assert not np.array_equal(
    params["bert/encoder/layer_1/output/kernel"],
    converted_params["bert"]["encoder"]["layer_1"]["output"]["kernel"],
  )
