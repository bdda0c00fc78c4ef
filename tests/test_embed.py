"""tools/embed: per-layer token embeddings, pooling and attention maps equal transformers'."""

import json
import shutil

import jax
import numpy as np
import pytest

from bert_jax.models.bert.model import BertEncoder
from bert_jax.tools import convert, embed, workdir_params
from tests import hf_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

VOCAB = [
  "[PAD]",
  "[UNK]",
  "[CLS]",
  "[SEP]",
  "[MASK]",
  "the",
  "cat",
  "sat",
  "on",
  "mat",
  ".",
  "dog",
  "##s",
  "ran",
  "a",
  "and",
  "big",
  "small",
  "run",
  "##ning",
]
LINES = [
  "The cat sat on the mat.",
  "dogs ran ||| the big cat sat",
  "",
  "a",
  "small cats running ||| dogs",
]


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
  """(HF model, workdir, path of the lines, npz of --layers=0,-1,1 --attention --batch_size=2)."""
  root = tmp_path_factory.mktemp("embed")
  model = hf_reference.random_bert(
    transformers,
    torch,
    kind="model",
    seed=11,
    vocab_size=len(VOCAB),
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=48,
    max_position_embeddings=32,
  )
  model.save_pretrained(root / "hf")
  (root / "hf" / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  assert (
    convert.main(["convert", "--from=hf", f"--input={root / 'hf'}", f"--output={root / 'workdir'}"])
    == 0
  )
  (root / "lines.txt").write_text("\n".join(LINES) + "\n")
  assert (
    embed.main(
      [
        "embed",
        f"--checkpoint={root / 'workdir'}",
        f"--input={root / 'lines.txt'}",
        f"--output={root / 'out.npz'}",
        "--layers=0,-1,1",
        "--attention",
        "--batch_size=2",
      ]
    )
    == 0
  )
  return model, root / "workdir", root / "lines.txt", dict(np.load(root / "out.npz"))


def _reference_features(root):
  tokenizer = transformers.BertTokenizerFast(
    vocab_file=str(root / "hf" / "vocab.txt"), do_lower_case=True
  )
  pairs = [line.split("|||") for line in LINES]
  texts = [(p[0].strip(), p[1].strip()) if len(p) > 1 else p[0] for p in pairs]
  return tokenizer(texts, padding=True, return_tensors="np")


def test_tokens_and_segments_equal_transformers_tokenizer(embedded):
  _, workdir, _, out = embedded
  reference = _reference_features(workdir.parent)
  np.testing.assert_array_equal(out["input_ids"], reference["input_ids"])
  np.testing.assert_array_equal(out["token_type_ids"], reference["token_type_ids"])
  np.testing.assert_array_equal(out["lengths"], reference["attention_mask"].sum(axis=1))
  assert list(out["tokens"][1][: out["lengths"][1]]) == [
    "[CLS]",
    "dog",
    "##s",
    "ran",
    "[SEP]",
    "the",
    "big",
    "cat",
    "sat",
    "[SEP]",
  ]
  assert out["tokens"][3][3] == ""  # "[CLS] a [SEP]", then padding.


def test_layers_and_attention_equal_transformers(embedded):
  model, _, _, out = embedded
  mask = np.arange(out["input_ids"].shape[1])[None, :] < out["lengths"][:, None]
  reference = hf_reference.torch_outputs(
    torch, model, out["input_ids"], out["token_type_ids"], mask.astype(np.int32)
  )
  np.testing.assert_array_equal(out["layers"], [0, 2, 1])
  for k, layer in enumerate(out["layers"]):
    np.testing.assert_allclose(
      out["embeddings"][:, k][mask], reference["hidden_states"][layer][mask], atol=1e-5, rtol=1e-5
    )
  assert not out["embeddings"][~np.broadcast_to(mask[:, None], out["embeddings"].shape[:3])].any()
  attention = out["attention"]  # [N, layers, heads, L, L]
  assert attention.shape[:3] == (len(LINES), 2, 4)
  query_and_key = mask[:, None, None, :, None] & mask[:, None, None, None, :]
  reference_attention = np.stack(reference["attentions"], axis=1)
  np.testing.assert_allclose(
    attention[np.broadcast_to(query_and_key, attention.shape)],
    reference_attention[np.broadcast_to(query_and_key, attention.shape)],
    atol=1e-5,
  )
  real_rows = np.broadcast_to(mask[:, None, None, :], attention.shape[:4])
  np.testing.assert_allclose(attention.sum(axis=-1)[real_rows], 1.0, atol=1e-6)
  assert not attention[~np.broadcast_to(query_and_key, attention.shape)].any()


def test_last_layer_equals_a_direct_model_apply(embedded):
  _, workdir, _, out = embedded
  run = workdir_params.read_run(str(workdir))
  mask = np.arange(out["input_ids"].shape[1])[None, :] < out["lengths"][:, None]
  hidden, _ = jax.jit(BertEncoder(run.model).apply)(
    {"params": run.params["bert"]}, out["input_ids"], out["token_type_ids"], mask.astype(np.int32)
  )
  np.testing.assert_allclose(out["embeddings"][:, 1][mask], np.asarray(hidden)[mask], atol=1e-6)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_pooling_of_the_token_embeddings_at_another_batch_size(embedded, tmp_path, pooling):
  _, workdir, lines, out = embedded
  assert (
    embed.main(
      [
        "embed",
        f"--checkpoint={workdir}",
        f"--input={lines}",
        f"--output={tmp_path / 'pooled.npz'}",
        "--layers=-1",
        f"--pooling={pooling}",
        "--batch_size=4",
      ]
    )
    == 0
  )
  pooled = np.load(tmp_path / "pooled.npz")["embeddings"]
  assert pooled.dtype == np.float32 and pooled.shape == (len(LINES), 1, 32)
  tokens = out["embeddings"][:, 1]  # Layer 2 = -1, every token.
  if pooling == "cls":
    expected = tokens[:, 0]
  else:
    expected = tokens.sum(axis=1) / out["lengths"][:, None]
  np.testing.assert_allclose(pooled[:, 0], expected, atol=1e-6)


def _without_vocab(workdir, tmp_path):
  copy = tmp_path / "no_vocab"
  shutil.copytree(workdir, copy)
  config = json.loads((copy / "config.json").read_text())
  del config["data"]
  (copy / "config.json").write_text(json.dumps(config))
  return copy


@pytest.mark.parametrize(
  "case,expected",
  [
    ("small_vocab", "has 10 entries but model.vocab_size is 20"),
    ("no_vocab", "records no vocab; pass --vocab=vocab.txt"),
    ("layer", "--layers has 3, but the model has hidden states 0 (embeddings) to 2"),
    ("length", "--max_seq_length=64 must be in [3, 32]"),
    ("empty_input", "is empty"),
    ("no_checkpoint", "holds no checkpoint"),
  ],
)
def test_bad_input_fails_with_one_line(embedded, tmp_path, capsys, case, expected):
  _, workdir, lines, _ = embedded
  (tmp_path / "vocab10.txt").write_text("\n".join(VOCAB[:10]) + "\n")
  (tmp_path / "empty.txt").write_text("")
  flags = {"checkpoint": str(workdir), "input": str(lines), "output": str(tmp_path / "o.npz")}
  extra = []
  if case == "small_vocab":
    extra = [f"--vocab={tmp_path / 'vocab10.txt'}"]
  elif case == "no_vocab":
    flags["checkpoint"] = str(_without_vocab(workdir, tmp_path))
  elif case == "layer":
    extra = ["--layers=-1,3"]
  elif case == "length":
    extra = ["--max_seq_length=64"]
  elif case == "empty_input":
    flags["input"] = str(tmp_path / "empty.txt")
  else:
    flags["checkpoint"] = str(tmp_path)
  assert embed.main(["embed", *(f"--{k}={v}" for k, v in flags.items()), *extra]) == 2
  errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and expected in errors[0], errors
  assert not (tmp_path / "o.npz").exists()
