"""RoBERTa pretraining: FULL-SENTENCES rows across documents, dynamic masking, no NSP, and the
configs (roberta_tiny end to end on a byte-level BPE trained from the embedded corpus)."""

import importlib.util
import json

import numpy as np
import pytest

from bert_jax.data import default_corpus, text_corpus
from bert_jax.data.pretraining_config import PretrainingDataConfig
from bert_jax.data.pretraining_pipeline import PretrainingData
from bert_jax.errors import UserInputError
from bert_jax.tools import convert, train_vocab
from bert_jax.train.loop import train_and_evaluate
from tests import finetune_fixtures, helpers, run_helpers

VOCAB_SIZE = 1000
LENGTH = 64


@pytest.fixture(scope="module")
def corpus_and_vocab(tmp_path_factory):
  """(corpus file of ~200 short documents, byte-level BPE vocab.json trained on it).

  The documents are runs of 4 sentences of the sample's first 60 articles: short enough that
  many rows hold the end of one and the start of the next.
  """
  root = tmp_path_factory.mktemp("roberta_data")
  articles = text_corpus.read_documents(default_corpus.default_corpus_path())[:60]
  documents = [a[i : i + 4] for a in articles for i in range(0, min(len(a), 16), 4)]
  corpus = root / "corpus.txt"
  corpus.write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
  vocab = str(root / "bpe" / "vocab.json")
  train_vocab.train(inputs=str(corpus), output=vocab, kind="bytelevel_bpe", vocab_size=VOCAB_SIZE)
  return str(corpus), vocab


def _data(corpus, vocab, **overrides):
  values = dict(
    corpus_paths=(corpus,),
    vocab_path=vocab,
    lowercase=False,
    max_seq_length=LENGTH,
    max_predictions_per_seq=10,
    objective="none",
    packing="full_sentences",
    num_eval_examples=8,
  )
  values.update(overrides)
  return PretrainingData(PretrainingDataConfig(**values), model_vocab_size=VOCAB_SIZE)


def _unmasked(batch):
  ids = batch["input_ids"].copy()
  rows, slots = np.nonzero(batch["masked_lm_weights"])
  ids[rows, batch["masked_lm_positions"][rows, slots]] = batch["masked_lm_ids"][rows, slots]
  return ids


def test_full_sentence_rows_cross_documents_with_a_separator(corpus_and_vocab):
  data = _data(*corpus_and_vocab)
  (batch,) = [
    b for _, b in zip(range(1), data.batches(split="train", seed=0, global_batch_size=32))
  ]
  ids, mask = _unmasked(batch), batch["input_mask"]
  assert (ids[:, 0] == 0).all()  # <s>
  assert (batch["token_type_ids"] == 0).all() and (batch["next_sentence_labels"] == 0).all()
  # Whole sentences of ~25 tokens: rows are mostly full at 64.
  assert (mask > 0).sum(1).mean() > 0.8 * LENGTH
  crossing = np.flatnonzero(mask.max(1) > 1)
  assert len(crossing) > 0  # Some rows hold the end of one document and the next one.
  for row in crossing:
    boundary = np.flatnonzero(np.diff(mask[row]) == 1)[0]  # Last token of document 1.
    assert ids[row, boundary] == 2  # </s> closes every document part.
  assert (ids[mask == 0] == 1).all()  # <pad>
  positions = batch["masked_lm_positions"][batch["masked_lm_weights"] > 0]
  masked_rows = np.nonzero(batch["masked_lm_weights"])[0]
  assert not np.isin(ids[masked_rows, positions], [0, 1, 2]).any()  # Specials never masked.


def test_masks_change_every_time_a_row_is_read(corpus_and_vocab, tmp_path):
  """Two long documents pack into mostly the same rows in either order; each epoch masks a
  row that comes again anew."""
  corpus, vocab = corpus_and_vocab
  lines = open(corpus, encoding="utf-8").read().replace("\n\n", "\n").splitlines()
  two = tmp_path / "two_documents.txt"
  two.write_text("\n".join(lines[: len(lines) // 2] + [""] + lines[len(lines) // 2 :]) + "\n")
  data = _data(str(two), vocab, eval_fraction=0.0)
  epoch_size = data.train_examples(0).epoch_size
  assert epoch_size >= 32
  batches = data.batches(split="train", seed=0, global_batch_size=epoch_size)
  first, second = next(batches), next(batches)
  rows = {tuple(r): i for i, r in enumerate(_unmasked(first))}
  again = [(rows[tuple(r)], j) for j, r in enumerate(_unmasked(second)) if tuple(r) in rows]
  assert len(again) > epoch_size // 2  # The same rows, in another order ...
  same_mask = [
    np.array_equal(first["masked_lm_positions"][i], second["masked_lm_positions"][j])
    for i, j in again
  ]
  assert sum(same_mask) <= 1  # ... masked differently.


def test_full_sentences_need_objective_none():
  with pytest.raises(UserInputError, match="data.objective='none'"):
    PretrainingDataConfig(packing="full_sentences", objective="nsp")
  with pytest.raises(UserInputError, match="data.packing is 'docs'"):
    PretrainingDataConfig(packing="docs", objective="none")


def _config(name, arg=None):
  spec = importlib.util.spec_from_file_location(name, run_helpers.REPO / "configs" / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


def test_roberta_configs_hold_the_papers_recipe():
  base, large = _config("roberta_base"), _config("roberta_large")
  for config, lr, warmup in ((base, 6e-4, 24_000), (large, 4e-4, 30_000)):
    optimizer = config.optimizer
    assert (optimizer.b1, optimizer.b2, optimizer.eps, optimizer.weight_decay) == (
      0.9,
      0.98,
      1e-6,
      0.01,
    )
    assert (optimizer.learning_rate, optimizer.warmup_steps, optimizer.max_grad_norm) == (
      lr,
      warmup,
      0.0,
    )
    assert (config.global_batch_size, config.num_train_steps) == (8192, 500_000)
    assert (config.data.max_seq_length, config.model.max_position_embeddings) == (512, 514)
    assert (config.data.packing, config.data.objective) == ("full_sentences", "none")
    assert config.model.hidden_dropout_rate == config.model.attention_dropout_rate == 0.1
  assert (base.model.size, large.model.size) == ("base", "large")
  xlmr = _config("xlm_roberta_base")
  assert (xlmr.model.family, xlmr.model.vocab_size) == ("xlm_roberta", 250_002)


def test_roberta_tiny_pretrains_and_exports_to_transformers(corpus_and_vocab, tmp_path):
  transformers = pytest.importorskip("transformers")
  pytest.importorskip("torch")
  corpus, vocab = corpus_and_vocab
  config = finetune_fixtures.set_keys(
    _config("roberta_tiny", vocab),
    {
      "num_train_steps": 20,
      "global_batch_size": 16,
      "log_every_steps": 10,
      "eval_every_steps": 20,
      "checkpoint_every_steps": 20,
      "peak_flops_per_device": 1e12,
      "model.vocab_size": VOCAB_SIZE,
      "data.corpus_paths": (corpus,),
      "data.max_seq_length": LENGTH,
      "data.max_predictions_per_seq": 10,
      "data.num_eval_examples": 16,
      "optimizer.warmup_steps": 4,
    },
  )
  train_and_evaluate(config, str(tmp_path / "run"), helpers.one_device())
  first, last = run_helpers.read_metrics(tmp_path / "run", "train")
  # Learning from the uniform guess, ln(1000) = 6.91 (seen: 6.78 after 10 steps, 6.49 at 20).
  assert last["mlm_loss"] < min(first["mlm_loss"] - 0.15, np.log(VOCAB_SIZE) - 0.3), (first, last)
  assert not any(key.startswith(("nsp", "sop")) for key in last)
  params = run_helpers.restore_params(tmp_path / "run", 20)
  assert params["bert/embeddings/position_embeddings/embedding"].shape == (130, 128)
  assert params["bert/embeddings/token_type_embeddings/embedding"].shape == (1, 128)
  assert not any(k.startswith(("nsp_head", "bert/pooler")) for k in params)
  out = tmp_path / "hf"
  assert convert.main(["convert", "--to=hf", f"--input={tmp_path / 'run'}", f"--output={out}"]) == 0
  loaded, info = transformers.RobertaForMaskedLM.from_pretrained(out, output_loading_info=True)
  assert (info["missing_keys"], info["unexpected_keys"]) == ([], [])
  assert json.loads((out / "config.json").read_text())["max_position_embeddings"] == 130
  tokenizer = transformers.AutoTokenizer.from_pretrained(out)
  assert type(tokenizer).__name__ == "RobertaTokenizerFast" and len(tokenizer) == VOCAB_SIZE
