"""train_vocab (WordPiece and SentencePiece) and SentencePiece in the pipeline."""

import dataclasses

import numpy as np
import pytest

from bert_jax.data import (
  default_corpus,
  pretraining_config,
  pretraining_pipeline,
  text_corpus,
  tokenization,
)
from bert_jax.tools import train_vocab


@pytest.fixture(scope="module")
def text_path(tmp_path_factory):
  documents = text_corpus.read_documents(default_corpus.default_corpus_path())[:30]
  path = tmp_path_factory.mktemp("vocab") / "text.txt"
  path.write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
  return str(path)


def test_wordpiece_is_deterministic_and_loads(text_path, tmp_path):
  outputs = [str(tmp_path / f"vocab{i}.txt") for i in (0, 1)]
  for output in outputs:
    assert (
      train_vocab.main(
        ["train_vocab", f"--input={text_path}", f"--output={output}", "--vocab_size=800"]
      )
      == 0
    )
  assert open(outputs[0]).read() == open(outputs[1]).read()
  tokenizer = tokenization.load_tokenizer(outputs[0])
  assert 700 < tokenizer.vocab_size <= 800 and tokenizer.special_ids.pad == 0
  ids = tokenizer.encode("The history of anarchism is long.")
  assert tokenizer.special_ids.unk not in ids


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_sentencepiece_trains_loads_and_feeds_the_pipeline(text_path, tmp_path, model_type):
  output = str(tmp_path / "sp.model")
  assert (
    train_vocab.main(
      [
        "train_vocab",
        f"--input={text_path}",
        f"--output={output}",
        "--kind=sentencepiece",
        f"--model_type={model_type}",
        "--vocab_size=1000",
      ]
    )
    == 0
  )
  tokenizer = tokenization.load_tokenizer(output)
  assert tokenizer.vocab_size == 1000
  special = tokenizer.special_ids
  assert (special.pad, special.unk) == (0, 1)
  assert tokenizer.first_regular_id > max(dataclasses.astuple(special))
  pieces = tokenizer.convert_ids_to_tokens(tokenizer.encode("Anarchism is a political philosophy"))
  assert pieces[0].startswith("\u2581")
  continuation = tokenizer.is_continuation()
  assert not continuation[list(dataclasses.astuple(special))].any() and continuation.any()
  config = pretraining_config.PretrainingDataConfig(
    corpus_paths=(text_path,),
    vocab_path=output,
    max_seq_length=64,
    max_predictions_per_seq=10,
    masking="whole_word",
  )
  batch = next(
    pretraining_pipeline.PretrainingData(config, model_vocab_size=1000).batches(
      split="train", seed=0, global_batch_size=16
    )
  )
  assert np.all(batch["input_ids"][:, 0] == special.cls)
  assert batch["masked_lm_weights"].sum() > 16 * 4


def test_bad_arguments(text_path, tmp_path, capsys):
  assert (
    train_vocab.main(
      [
        "train_vocab",
        f"--input={text_path}",
        f"--output={tmp_path / 'sp.txt'}",
        "--kind=sentencepiece",
      ]
    )
    == 2
  )
  assert "must end in .model" in capsys.readouterr().err
  assert (
    train_vocab.main(
      ["train_vocab", f"--input={tmp_path / 'none.txt'}", f"--output={tmp_path / 'v.txt'}"]
    )
    == 2
  )
  assert "does not exist" in capsys.readouterr().err
  bogus = tmp_path / "bogus.model"
  bogus.write_bytes(b"not a model")
  with pytest.raises(ValueError, match=r"bogus.model is not a SentencePiece model"):
    tokenization.load_tokenizer(str(bogus))
