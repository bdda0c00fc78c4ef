"""RoBERTa's byte-level BPE and XLM-R's SentencePiece: trained here, ids equal transformers'."""

import json

import pytest

from bert_jax.data import bpe_tokenization, default_corpus, tokenization
from bert_jax.errors import UserInputError
from bert_jax.tools import train_vocab

transformers = pytest.importorskip("transformers")

VOCAB_SIZE = 1500


@pytest.fixture(scope="module")
def text(tmp_path_factory):
  """(path, non-empty lines) of the first ~400 KB of the embedded Wikipedia sample."""
  with open(default_corpus.default_corpus_path(), encoding="utf-8") as f:
    sample = f.read(400_000).rsplit("\n", 1)[0]
  path = tmp_path_factory.mktemp("text") / "sample.txt"
  path.write_text(sample, encoding="utf-8")
  return str(path), [line for line in sample.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def byte_level(text, tmp_path_factory):
  vocab = str(tmp_path_factory.mktemp("roberta") / "vocab.json")
  return train_vocab.train(
    inputs=text[0], output=vocab, kind="bytelevel_bpe", vocab_size=VOCAB_SIZE
  ), vocab


@pytest.fixture(scope="module")
def xlmr(text, tmp_path_factory):
  model = str(tmp_path_factory.mktemp("xlmr") / "sentencepiece.bpe.model")
  return train_vocab.train(
    inputs=text[0], output=model, kind="xlmr_sentencepiece", vocab_size=VOCAB_SIZE
  ), model


def _pairs(lines):
  return lines[:200:2], lines[1:200:2]


def test_byte_level_bpe_ids_equal_roberta_tokenizer_fast(text, byte_level):
  tokenizer, vocab = byte_level
  assert isinstance(tokenizer, bpe_tokenization.ByteLevelBpeTokenizer)
  reference = transformers.RobertaTokenizerFast(
    vocab_file=vocab, merges_file=bpe_tokenization.merges_path(vocab)
  )
  lines = text[1]
  assert tokenizer.vocab_size == len(reference) == VOCAB_SIZE
  ours = tokenizer.encode_batch(lines)
  assert ours == reference(lines, add_special_tokens=False)["input_ids"]
  assert sum(map(len, ours)) > 50_000  # Real text, not a handful of tokens.
  a, b = _pairs(lines)
  pairs = [
    tokenizer.with_special_tokens(x, y)[0] for x, y in zip(*map(tokenizer.encode_batch, (a, b)))
  ]
  assert pairs == reference(a, b)["input_ids"]
  assert pairs[0][0] == 0 and pairs[0].count(2) == 3  # <s> a </s></s> b </s>
  singles = [tokenizer.with_special_tokens(x)[0] for x in tokenizer.encode_batch(a)]
  assert singles == reference(a)["input_ids"]


def test_byte_level_vocab_is_laid_out_as_roberta(byte_level):
  tokenizer, vocab = byte_level
  special = tokenizer.special_ids
  assert (special.cls, special.pad, special.sep, special.unk) == (0, 1, 2, 3)
  assert special.mask == VOCAB_SIZE - 1 and tokenizer.tokens[-1] == "<mask>"
  assert tokenizer.first_regular_id == 4
  assert tokenizer.num_special_tokens(pair=True) == 4
  continuation = tokenizer.is_continuation()
  assert not continuation[[0, 1, 2, 3, VOCAB_SIZE - 1]].any()
  ids = tokenizer.encode(" the history")
  assert [bool(continuation[i]) for i in ids][0] is False
  with open(vocab, encoding="utf-8") as f:
    assert len(json.load(f)) == VOCAB_SIZE


@pytest.mark.parametrize("reference_class", ["XLMRobertaTokenizer", "XLMRobertaTokenizerFast"])
def test_xlmr_sentencepiece_ids_equal_xlm_roberta_tokenizers(text, xlmr, reference_class):
  tokenizer, model = xlmr
  assert isinstance(tokenizer, bpe_tokenization.FairseqSentencePieceTokenizer)
  reference = getattr(transformers, reference_class)(vocab_file=model)
  assert tokenizer.vocab_size == len(reference) == VOCAB_SIZE
  assert tokenizer.tokens[:4] == ("<s>", "<pad>", "</s>", "<unk>")
  assert tokenizer.special_ids.mask == VOCAB_SIZE - 1 == reference.mask_token_id
  lines = text[1]
  ours = tokenizer.encode_batch(lines)
  assert ours == reference(lines, add_special_tokens=False)["input_ids"]
  a, b = _pairs(lines)
  pairs = [
    tokenizer.with_special_tokens(x, y)[0] for x, y in zip(*map(tokenizer.encode_batch, (a, b)))
  ]
  assert pairs == reference(a, b)["input_ids"]
  # A character the model never saw is fairseq's <unk> (3), not SentencePiece's (0).
  assert tokenization.load_tokenizer(model).encode("\u4e00")[-1] == 3 == reference.unk_token_id


def test_xlmr_sentencepiece_is_a_unigram_model_as_published(xlmr):
  from sentencepiece import sentencepiece_model_pb2  # pylint: disable=g-import-not-at-top

  proto = sentencepiece_model_pb2.ModelProto()
  with open(xlmr[1], "rb") as f:
    proto.ParseFromString(f.read())
  assert proto.trainer_spec.model_type == proto.trainer_spec.UNIGRAM


def test_bad_byte_level_inputs_fail_with_one_line(byte_level, tmp_path):
  _, vocab = byte_level
  with pytest.raises(FileNotFoundError, match="merges.txt"):
    lonely = tmp_path / "vocab.json"
    lonely.write_text(open(vocab, encoding="utf-8").read(), encoding="utf-8")
    tokenization.load_tokenizer(str(lonely))
  (tmp_path / "merges.txt").write_text("#version: 0.2\n")
  (tmp_path / "vocab.json").write_text(json.dumps({"a": 0, "b": 1}))
  with pytest.raises(UserInputError, match="lacks <s>, <pad>"):
    tokenization.load_tokenizer(str(tmp_path / "vocab.json"))
  with pytest.raises(UserInputError, match="must be a vocab.json"):
    train_vocab.train(
      inputs=vocab, output=str(tmp_path / "v.txt"), kind="bytelevel_bpe", vocab_size=500
    )
