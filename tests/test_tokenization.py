"""WordPiece tokenisation equals Hugging Face's BERT tokenizers; vocab errors are clear."""

import os

import pytest
import transformers

from bert_jax.data import default_corpus, sentences, tokenization
from bert_jax.tools import build_default_corpus

# Written here, not taken from the corpus: accents, CJK, emoji, control and zero-width
# characters, a word over BERT's 100-character limit, odd whitespace and punctuation.
TRICKY_TEXTS = [
  "Café Müller, naïve façade; Ångström — ÉCOLE Normale Supérieure.",
  "北京大学 and 東京大学 are universities; 서울 is in Korea.",
  "emoji 😀🎉 in text, 👩‍👩‍👧 family, ♥ and ★.",
  "Greek ΑΒΓ Ωμέγα, Cyrillic Москва, Hebrew שלום, Arabic مرحبا.",
  "zero\u200bwidth\u200d joiner and soft\u00adhyphen, tab\there\u3000ideographic space",
  "control\x00char\x07bell and \ufffd replacement",
  "x" * 150 + " after a very long word",
  "don't stop-the-press: U.S.A. $3.50 (approx.) 5% [sic] {braces} #hash @at",
  "",
  "   ",
]


@pytest.fixture(scope="module")
def vocab_path():
  return default_corpus.default_vocab_path()


@pytest.fixture(scope="module")
def tokenizer(vocab_path):
  return tokenization.load_wordpiece(vocab_path, lowercase=True)


@pytest.fixture(scope="module")
def corpus_lines():
  with open(default_corpus.default_corpus_path(), encoding="utf-8") as f:
    lines = [line.strip() for line in f if line.strip()]
  return lines[::8]  # ~2,000 real sentences from every article.


def test_ids_equal_hugging_face_fast_tokenizer(tokenizer, vocab_path, corpus_lines):
  reference = transformers.BertTokenizerFast(vocab_file=vocab_path, do_lower_case=True)
  texts = corpus_lines + TRICKY_TEXTS
  expected = reference(texts, add_special_tokens=False)["input_ids"]
  actual = tokenizer.encode_batch(texts)
  assert actual == expected
  assert sum(map(len, actual)) > 50_000
  # Real prose is mostly in-vocab: the tokenizer is not degenerate.
  unknown = sum(ids.count(tokenizer.special_ids.unk) for ids in actual[: len(corpus_lines)])
  assert unknown / sum(map(len, actual[: len(corpus_lines)])) < 0.001


def test_ids_equal_pure_python_bert_tokenizer(tokenizer, vocab_path, corpus_lines):
  # transformers' slow BertTokenizer is an independent, pure-Python implementation.
  reference = transformers.BertTokenizer(vocab_file=vocab_path, do_lower_case=True)
  texts = corpus_lines[::5] + TRICKY_TEXTS
  expected = [reference.encode(t, add_special_tokens=False) for t in texts]
  assert tokenizer.encode_batch(texts) == expected
  assert [tokenizer.encode(t) for t in TRICKY_TEXTS] == expected[-len(TRICKY_TEXTS) :]


def test_cased_option_keeps_case_and_accents(vocab_path):
  cased = tokenization.load_wordpiece(vocab_path, lowercase=False)
  reference = transformers.BertTokenizerFast(vocab_file=vocab_path, do_lower_case=False)
  assert (
    cased.encode_batch(TRICKY_TEXTS)
    == reference(TRICKY_TEXTS, add_special_tokens=False)["input_ids"]
  )
  uncased = tokenization.load_wordpiece(vocab_path, lowercase=True)
  assert uncased.encode("Café") == uncased.encode("cafe")
  assert cased.encode("Café") != uncased.encode("Café")


def test_embedded_vocab_layout(tokenizer):
  assert tokenizer.vocab_size == 8192
  assert tokenizer.special_ids == tokenization.SpecialTokenIds(pad=0, unk=1, cls=2, sep=3, mask=4)
  assert tokenizer.first_regular_id == 5
  assert tokenizer.tokens[:5] == tokenization.SPECIAL_TOKENS
  continuation = tokenizer.is_continuation()
  assert continuation.shape == (8192,)
  assert continuation[tokenizer.tokens.index("##s")]
  assert not continuation[tokenizer.tokens.index("the")]
  assert tokenizer.convert_ids_to_tokens(tokenizer.encode("The history of Alabama")) == [
    "the",
    "history",
    "of",
    "alabama",
  ]


def test_first_regular_id_skips_reserved_block(tmp_path):
  # Google's layout: [PAD], [unused..], [UNK], [CLS], [SEP], [MASK], more [unused..], words.
  tokens = [
    "[PAD]",
    "[unused0]",
    "[unused1]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "[unused2]",
    "a",
    "b",
    "##b",
  ]
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
  tokenizer = tokenization.load_wordpiece(str(path))
  assert tokenizer.first_regular_id == 8
  assert tokenizer.special_ids == tokenization.SpecialTokenIds(pad=0, unk=3, cls=4, sep=5, mask=6)
  assert tokenizer.encode("ab b c") == [8, 10, 9, 3]


def test_missing_vocab_file_is_a_clear_error(tmp_path):
  missing = str(tmp_path / "nope" / "vocab.txt")
  with pytest.raises(FileNotFoundError, match=r"vocab file .*nope/vocab.txt does not exist"):
    tokenization.load_wordpiece(missing)


@pytest.mark.parametrize("dropped", ["[MASK]", "[CLS]", "[SEP]", "[PAD]"])
def test_vocab_missing_a_special_token_is_a_clear_error(tmp_path, vocab_path, dropped):
  with open(vocab_path, encoding="utf-8") as f:
    tokens = [line.rstrip("\n") for line in f if line.rstrip("\n") != dropped]
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
  with pytest.raises(ValueError, match=rf"lacks \{dropped[:-1]}\]; BERT pretraining needs"):
    tokenization.load_wordpiece(str(path))


def test_duplicate_and_empty_vocab_are_clear_errors(tmp_path):
  path = tmp_path / "dup.txt"
  path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nword\nword\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"lists 'word' twice \(lines 6 and 7\)"):
    tokenization.load_wordpiece(str(path))
  empty = tmp_path / "empty.txt"
  empty.write_text("", encoding="utf-8")
  with pytest.raises(ValueError, match="is empty"):
    tokenization.load_wordpiece(str(empty))


def test_embedded_corpus_format_and_attribution():
  path = default_corpus.default_corpus_path()
  with open(path, encoding="utf-8") as f:
    text = f.read()
  documents = text.strip("\n").split("\n\n")
  assert 1_000_000 < os.path.getsize(path) < 5_000_000
  assert all(
    line.strip() == line and len(line.split()) >= 4 for doc in documents for line in doc.split("\n")
  )
  for markup in ("[[", "]]", "{{", "}}", "<ref", "'''", "==", "Category:", "thumb|"):
    assert markup not in text, markup
  attribution_path = os.path.join(os.path.dirname(path), "ATTRIBUTION.md")
  with open(attribution_path, encoding="utf-8") as f:
    attribution = f.read()
  assert "CC BY-SA" in attribution and "English Wikipedia" in attribution
  assert "python -m bert_jax.tools.build_default_corpus" in attribution
  titles = attribution.split("## Articles\n", 1)[1].strip().splitlines()
  assert len(titles) == len(documents)
  # Each article's opening sentence names its subject (Wikipedia style) for most articles.
  named = sum(
    t.lstrip("- ").split(" (")[0].lower() in d.split("\n")[0].lower()
    for t, d in zip(titles, documents)
  )
  assert named / len(documents) > 0.8


def test_sentence_splitter_keeps_abbreviations_and_initials():
  text = (
    'Dr. J. S. Bach was born in 1685. He wrote fugues, e.g. "The Art of Fugue". '
    "The U.S. Army was not involved! Was it? Yes."
  )
  assert sentences.split_sentences(text) == [
    "Dr. J. S. Bach was born in 1685.",
    'He wrote fugues, e.g. "The Art of Fugue".',
    "The U.S. Army was not involved!",
    "Was it?",
    "Yes.",
  ]
  paragraphs = build_default_corpus.prose_paragraphs(
    "==History==\n* a list item.\nA caption without a full stop\n"
    "'''Bold''' prose with a gap ( ) and debris , here.\n|cell | text.\n"
  )
  assert paragraphs == ["Bold prose with a gap and debris, here."]
