"""Workdirs can move: paths inside a workdir are stored relative to it, so a converted model (and
a run fine-tuned from it) copied elsewhere, the original removed, still embeds and initialises
runs. A Hugging Face directory with only ``tokenizer.json`` (transformers 5) converts with its
WordPiece vocab, and bert_jax tokenises with it exactly as ``BertTokenizerFast`` does."""

import json
import pathlib
import shutil

import numpy as np
import pytest
import tokenizers

from bert_jax.data import default_corpus, text_corpus, tokenization
from bert_jax.default_config import finetune_config
from bert_jax.errors import UserInputError
from bert_jax.tools import convert, embed
from bert_jax.train.loop import train_and_evaluate
from bert_jax.train.settings import settings_from_config
from tests import finetune_fixtures, helpers, hf_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")


def _sentences(count=40):
  documents = text_corpus.read_documents(default_corpus.default_corpus_path())
  return [s for d in documents for s in d][:count] + ["Ünïcödé CAFÉ naïve 3.14 don't", ""]


def _hf_dir(root, lowercase):
  """A tiny random BertModel saved with tokenizer.json (and tokenizer_config.json) only."""
  model = hf_reference.random_bert(
    transformers,
    torch,
    kind="model",
    vocab_size=8192,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
  )
  model.save_pretrained(root)
  tokenizer = transformers.BertTokenizerFast(
    vocab_file=default_corpus.default_vocab_path(), do_lower_case=lowercase
  )
  tokenizer.backend_tokenizer.save(str(root / "tokenizer.json"))
  (root / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer"}))
  assert not (root / "vocab.txt").exists()
  return root


@pytest.fixture(scope="module")
def moved(tmp_path_factory):
  """A converted tokenizer.json-only model, copied elsewhere with the original removed."""
  root = tmp_path_factory.mktemp("relocate")
  hf = _hf_dir(root / "hf", lowercase=True)
  convert.from_hf(str(hf), str(root / "original"))
  shutil.copytree(root / "original", root / "elsewhere" / "copy")
  shutil.rmtree(root / "original")
  return hf, root / "elsewhere" / "copy"


@pytest.mark.parametrize("lowercase", [True, False])
def test_tokenizer_json_only_directory_converts_with_its_vocab(lowercase, tmp_path):
  hf = _hf_dir(tmp_path / "hf", lowercase)
  convert.from_hf(str(hf), str(tmp_path / "converted"))
  stored = json.loads((tmp_path / "converted" / "config.json").read_text())
  assert stored["data"] == {"vocab_path": "vocab.txt", "lowercase": lowercase}
  ours = tokenization.load_tokenizer(
    str(tmp_path / "converted" / "vocab.txt"), lowercase=stored["data"]["lowercase"]
  )
  # BertTokenizerFast re-applies its do_lower_case argument over the file's normaliser; the
  # file alone (tokenizers) must agree with it.
  reference = transformers.BertTokenizerFast(
    tokenizer_file=str(hf / "tokenizer.json"), do_lower_case=lowercase
  )
  raw = tokenizers.Tokenizer.from_file(str(hf / "tokenizer.json"))
  # A run fine-tuned from it takes its casing unless data.lowercase is set.
  files = {"data.train_path": "t.tsv", "data.eval_path": "d.tsv", "data.max_seq_length": 32}
  config = finetune_fixtures.set_keys(
    finetune_config("classification"),
    {"init_from": str(tmp_path / "converted"), "data.glue_task": "mrpc", **files},
  )
  assert settings_from_config(config).data.lowercase == lowercase
  config.data.lowercase = not lowercase
  assert settings_from_config(config).data.lowercase == (not lowercase)
  for sentence in _sentences():
    expected = reference(sentence, add_special_tokens=False)["input_ids"]
    assert raw.encode(sentence, add_special_tokens=False).ids == expected, sentence
    assert list(ours.encode(sentence)) == expected, sentence


def test_a_non_wordpiece_tokenizer_json_is_one_line(tmp_path):
  hf = _hf_dir(tmp_path / "hf", True)
  spec = json.loads((hf / "tokenizer.json").read_text())
  spec["model"]["type"] = "Unigram"
  (hf / "tokenizer.json").write_text(json.dumps(spec))
  with pytest.raises(UserInputError, match="holds a Unigram tokenizer, not BERT's WordPiece"):
    convert.from_hf(str(hf), str(tmp_path / "converted"))
  assert not (tmp_path / "converted").exists()


def test_a_moved_converted_model_embeds(moved, tmp_path):
  hf, copy = moved
  assert json.loads((copy / "config.json").read_text())["data"]["vocab_path"] == "vocab.txt"
  (tmp_path / "lines.txt").write_text("the cat sat on the mat\nDogs ran ||| far away\n")
  assert (
    embed.main(
      [
        "embed",
        f"--checkpoint={copy}",
        f"--input={tmp_path / 'lines.txt'}",
        f"--output={tmp_path / 'out.npz'}",
      ]
    )
    == 0
  )
  ids = np.load(tmp_path / "out.npz")["input_ids"]
  reference = transformers.BertTokenizerFast(tokenizer_file=str(hf / "tokenizer.json"))
  expected = reference("the cat sat on the mat")["input_ids"]
  assert list(ids[0][: len(expected)]) == expected


def test_a_moved_model_initialises_a_run_that_moves_too(moved, tmp_path):
  """init_from the moved copy; then the fine-tuned run itself moves, with its data files
  inside it (stored relative), and still embeds with its init_from's vocab."""
  _, copy = moved
  run = tmp_path / "run"
  train, dev = finetune_fixtures.write_mrpc_files(_mkdir(run / "data"), num_train=8, num_eval=8)
  config = finetune_fixtures.set_keys(
    finetune_config("classification"),
    {
      "init_from": str(copy),
      "data.glue_task": "mrpc",
      "data.train_path": train,
      "data.eval_path": dev,
      "data.max_seq_length": 32,
      "num_train_epochs": 0.0,
      "num_train_steps": 1,
      "global_batch_size": 8,
      "peak_flops_per_device": 1e12,
    },
  )
  metrics = train_and_evaluate(config, str(run), helpers.one_device())
  assert 0.0 <= metrics["accuracy"] <= 1.0
  stored = json.loads((run / "config.json").read_text())
  assert (stored["data"]["train_path"], stored["data"]["eval_path"]) == (
    "data/train.tsv",
    "data/dev.tsv",
  )
  assert stored["model"]["hidden_size"] == 32  # The converted model's, not BERT-base's.
  shutil.copytree(run, tmp_path / "moved_run")
  shutil.rmtree(run)
  (tmp_path / "lines.txt").write_text("the cat sat\n")
  out = tmp_path / "out.npz"
  flags = [f"--checkpoint={tmp_path / 'moved_run'}", f"--input={tmp_path / 'lines.txt'}"]
  assert embed.main(["embed", *flags, f"--output={out}"]) == 0
  assert np.load(out)["embeddings"].shape[-1] == 32


def _mkdir(path):
  pathlib.Path(path).mkdir(parents=True)
  return path
