"""XLM's tokenizer (Lample & Conneau 2019), with the interface of `tokenization`'s tokenizers.

Its files are transformers' ``XLMTokenizer``'s: ``vocab.json`` ({token: id}: ``<s>`` 0,
``</s>`` 1, ``<pad>`` 2, ``<unk>`` 3, ``<special0>`` .. ``<special9>`` 4..13, ``<special1>``
being the mask) and ``merges.txt`` beside it (one merge a line, ``a b`` with an optional count).
Text goes through XLM's preprocessing before its BPE:

1. Moses' punctuation normaliser, with the replacement of Unicode punctuation before it and
   the removal of non-printing characters after it (sacremoses);
2. Moses' tokenizer, without escaping (sacremoses);
3. lowercased models (``do_lowercase_and_remove_accent``): the text lowercased before step 1,
   and each word lowercased with its accents stripped after step 2;
4. BPE over each word, its last symbol marked with ``</w>`` (the Rust ``tokenizers`` library).

Moses' rules are English ones whatever the model's languages, as transformers applies them;
special tokens written in the text are split out first, as there; ids equal
``transformers.XLMTokenizer``'s. Sentences become ``<s> A </s>`` and pairs
``<s> A </s> B </s>``.
"""

import json
import re
import unicodedata

import numpy as np
import tokenizers
from tokenizers import models

from bert_jax.data import files
from bert_jax.data.bpe_tokenization import merges_path
from bert_jax.data.vocab_types import SpecialTokenIds, Vocab
from bert_jax.errors import UserInputError

END_OF_WORD = "</w>"
# XLM's special tokens in id order; <special1> is its mask.
SPECIALS = ("<s>", "</s>", "<pad>", "<unk>", *(f"<special{i}>" for i in range(10)))
MASK = "<special1>"
# transformers' XLMTokenizer tokenises with Moses' English rules whatever the model's languages
# (its `lang` argument never reaches the tokenizer through `__call__` or `encode`).
_MOSES_LANGUAGE = "en"


def is_xlm_vocab(vocab: dict) -> bool:
  """Whether a ``vocab.json``'s mapping is laid out as XLM's (its specials, no ``<mask>``)."""
  return MASK in vocab and "<mask>" not in vocab and vocab.get("<s>") == 0


def _read_merges(path):
  """merges.txt's rules as pairs (a count after them, XLM's codes format, is ignored)."""
  pairs = [line.split()[:2] for line in files.read_text(path).splitlines()]
  return [tuple(pair) for pair in pairs if len(pair) == 2 and not pair[0].startswith("#version")]


def _strip_accents(word: str) -> str:
  """XLM's ``lowercase_and_remove_accent`` of one word: lowercase, NFD, drop Mn marks."""
  decomposed = unicodedata.normalize("NFD", word.lower())
  return "".join(c for c in decomposed if unicodedata.category(c) != "Mn").lower()


def lowercase_characters(text: str) -> str:
  """transformers' lowercasing of a lowercased model's text before anything else sees it
  (before special tokens are split out, and before Moses, so "°C." splits as "°c ." would):
  character by character, line breaks kept."""
  return "".join(c if c == "\n" else c.lower() for c in text)


class MosesWords:
  """XLM's preprocessing and Moses tokenisation of a string into words (steps 1-3 above)."""

  def __init__(self, lowercase=True):
    """Builds it, lowercasing and stripping accents or not (XLM's lowercased models)."""
    import sacremoses  # pylint: disable=g-import-not-at-top (only XLM's vocabs need it)

    self.lowercase = bool(lowercase)
    self._normalizer = sacremoses.MosesPunctNormalizer(
      lang=_MOSES_LANGUAGE, pre_replace_unicode_punct=True, post_remove_control_chars=True
    )
    self._moses = sacremoses.MosesTokenizer(lang=_MOSES_LANGUAGE)

  def __call__(self, text: str) -> list[str]:
    if self.lowercase:
      text = lowercase_characters(text)
    text = self._normalizer.normalize(text)
    words = self._moses.tokenize(text, return_str=False, escape=False)
    if self.lowercase:
      words = [_strip_accents(word) for word in words]
    return [word for word in words if word]


class XlmTokenizer(Vocab):
  """XLM's Moses + ``</w>`` BPE tokenizer over ``vocab.json`` + ``merges.txt``."""

  def __init__(self, vocab_path, lowercase=True):
    """Builds the tokenizer.

    Args:
      vocab_path: XLM's ``vocab.json``, with ``merges.txt`` beside it.
      lowercase: lowercase and strip accents (XLM's ``do_lowercase_and_remove_accent``).

    Raises:
      FileNotFoundError: a file is missing.
      UserInputError: the files are not an XLM vocab.
    """
    merges = merges_path(vocab_path)
    for path in (vocab_path, merges):
      if not files.is_file(path):
        raise FileNotFoundError(
          f"{path} does not exist; an XLM vocab is vocab.json with merges.txt beside it"
        )
    vocab = json.loads(files.read_text(vocab_path))
    self._tokens = tuple(sorted(vocab, key=vocab.get))
    if [vocab[t] for t in self._tokens] != list(range(len(vocab))):
      raise UserInputError(f"{vocab_path}: the ids are not 0..{len(vocab) - 1} without gaps")
    missing = [t for t in SPECIALS if t not in vocab]
    if missing:
      raise UserInputError(
        f"{vocab_path} lacks {', '.join(missing)}; XLM vocabs hold {', '.join(SPECIALS)}: pass "
        "the model's own vocab.json"
      )
    self._special_ids = SpecialTokenIds(
      pad=vocab["<pad>"], unk=vocab["<unk>"], cls=vocab["<s>"], sep=vocab["</s>"], mask=vocab[MASK]
    )
    self._special = np.zeros(len(self._tokens), bool)
    self._special[[vocab[t] for t in SPECIALS]] = True
    self._ids = {t: vocab[t] for t in SPECIALS}
    self._special_pattern = re.compile("(" + "|".join(map(re.escape, SPECIALS)) + ")")
    # transformers merges whatever the codes say and looks the result up (<unk> if absent);
    # tokenizers needs every merge's parts and result in the vocab, which XLM's vocabs hold.
    rules = [
      (a, b) for a, b in _read_merges(merges) if a in vocab and b in vocab and a + b in vocab
    ]
    self._tokenizer = tokenizers.Tokenizer(
      models.BPE(vocab, rules, unk_token="<unk>", end_of_word_suffix=END_OF_WORD)
    )
    self._words = MosesWords(lowercase)

  @property
  def lowercase(self):
    return self._words.lowercase

  @property
  def first_regular_id(self):
    """The first id after the specials (random MLM replacements start there)."""
    return int(np.flatnonzero(~self._special)[0])

  def is_continuation(self):
    """All False: XLM marks a word's *last* piece (``</w>``), not the pieces that continue a
    word, so no id says alone that it continues one; whole-word strategies mask single pieces."""
    return np.zeros(len(self._tokens), bool)

  def encode(self, text):
    """Token ids of one string, without ``<s>`` / ``</s>``."""
    return self.encode_batch([text])[0]

  def encode_batch(self, texts):
    """Token ids of many strings (BPE in parallel), without ``<s>`` / ``</s>``.

    A special token written in the text (``<special1>``, ``</s>``) is that token, as
    transformers splits them out before tokenising the text around them.
    """
    if self.lowercase:
      texts = [lowercase_characters(text) for text in texts]
    # Specials at odd places (lowercasing leaves them as they are).
    segments = [self._special_pattern.split(text) for text in texts]
    words = [self._words(piece) for parts in segments for piece in parts[::2]]
    encodings = self._tokenizer.encode_batch(words, is_pretokenized=True, add_special_tokens=False)
    pieces = iter(e.ids for e in encodings)
    return [
      [
        i
        for j, part in enumerate(parts)
        for i in (next(pieces) if j % 2 == 0 else [self._ids[part]])
      ]
      for parts in segments
    ]
