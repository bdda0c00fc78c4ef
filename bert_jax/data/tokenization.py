"""WordPiece tokenisation of BERT ``vocab.txt`` files through the Rust ``tokenizers`` library.

The tokenizer is built from the same pieces as BERT's own (BERT normaliser: clean text, split
CJK characters, optional lowercasing with accent stripping; BERT pre-tokeniser: whitespace and
punctuation; greedy longest-match-first WordPiece with ``[UNK]`` for words it cannot spell), so
ids equal ``transformers.BertTokenizerFast(vocab_file=..., do_lower_case=...)`` and Google's
original ``tokenization.FullTokenizer``, at batch speed.
"""

import dataclasses
import json
import re

import numpy as np
import tokenizers
from tokenizers import models, normalizers, pre_tokenizers

from bert_jax.data import bpe_tokenization, files, xlm_tokenization
from bert_jax.data.vocab_types import SpecialTokenIds, Vocab
from bert_jax.errors import UserInputError

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
CONTINUATION_PREFIX = "##"
# BERT's WordPiece gives up on (and emits [UNK] for) words longer than this many characters.
_MAX_INPUT_CHARS_PER_WORD = 100
# Reserved entries such as [unused17] or [PAD]: never produced by tokenising text.
_RESERVED_TOKEN = re.compile(r"\[[^\[\]\s]+\]")


def read_vocab(vocab_path):
  """Reads a BERT ``vocab.txt`` (one token per line, line number = id) into a list of tokens.

  Raises:
    FileNotFoundError: the file does not exist.
    ValueError: the file is empty or lists a token twice.
  """
  if not files.is_file(vocab_path):
    raise FileNotFoundError(
      f"vocab file {vocab_path} does not exist; point data.vocab_path at a BERT vocab.txt "
      "(one token per line), e.g. bert_jax.data.default_corpus.default_vocab_path()"
    )
  with files.open_binary(vocab_path) as f:
    tokens = [line.decode("utf-8").rstrip("\r\n") for line in f]
  if not tokens:
    raise UserInputError(f"vocab file {vocab_path} is empty; it needs one token per line")
  first_line = {}
  for line_number, token in enumerate(tokens, start=1):
    if token in first_line:
      raise UserInputError(
        f"vocab file {vocab_path} lists {token!r} twice (lines {first_line[token]} and "
        f"{line_number}); every token must appear once because its line number is its id"
      )
    first_line[token] = line_number
  return tokens


def special_token_ids(tokens, vocab_path="<vocab>"):
  """Finds the ids of [PAD], [UNK], [CLS], [SEP] and [MASK] in a token list.

  Raises:
    ValueError: one of them is missing.
  """
  index = {token: i for i, token in enumerate(tokens)}
  missing = [t for t in SPECIAL_TOKENS if t not in index]
  if missing:
    raise UserInputError(
      f"vocab file {vocab_path} lacks {', '.join(missing)}; BERT pretraining needs all of "
      f"{', '.join(SPECIAL_TOKENS)}: add the missing ones as lines of the file (BERT vocabs "
      "put them first) or use a vocab built for BERT"
    )
  return SpecialTokenIds(
    pad=index["[PAD]"],
    unk=index["[UNK]"],
    cls=index["[CLS]"],
    sep=index["[SEP]"],
    mask=index["[MASK]"],
  )


class WordPieceTokenizer(Vocab):
  """A BERT WordPiece tokenizer over a fixed vocab; encodes without adding special tokens."""

  def __init__(self, tokens, lowercase=True, vocab_path="<vocab>"):
    """Builds the tokenizer.

    Args:
      tokens: the vocab, in id order.
      lowercase: lowercase and strip accents (uncased BERT) or keep text as is (cased BERT).
      vocab_path: where ``tokens`` came from, for error messages.
    """
    self._tokens = tuple(tokens)
    self._special_ids = special_token_ids(self._tokens, vocab_path)
    self._lowercase = lowercase
    tokenizer = tokenizers.Tokenizer(
      models.WordPiece(
        {token: i for i, token in enumerate(self._tokens)},
        unk_token="[UNK]",
        max_input_chars_per_word=_MAX_INPUT_CHARS_PER_WORD,
      )
    )
    # strip_accents=None follows `lowercase`, as BERT does: uncased models strip accents.
    tokenizer.normalizer = normalizers.BertNormalizer(
      clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    self._tokenizer = tokenizer

  @property
  def lowercase(self):
    return self._lowercase

  @property
  def first_regular_id(self):
    """The smallest id from which on the vocab holds ordinary word pieces.

    BERT vocabs open with a block of reserved entries (``[PAD]``, ``[unused0]``.., ``[UNK]``,
    ``[CLS]``, ``[SEP]``, ``[MASK]``, more ``[unused..]``); MLM's "random token" replacement
    draws from ``[first_regular_id, vocab_size)`` so it never inserts one of them.
    """
    leading_reserved = 0
    while leading_reserved < len(self._tokens) and _RESERVED_TOKEN.fullmatch(
      self._tokens[leading_reserved]
    ):
      leading_reserved += 1
    first = max(leading_reserved, max(dataclasses.astuple(self._special_ids)) + 1)
    if first >= len(self._tokens):
      raise UserInputError(
        f"vocab of {len(self._tokens)} entries has no ordinary tokens after its special ones"
      )
    return first

  def is_continuation(self):
    """Boolean array [vocab_size]: True for ``##`` pieces that continue a word.

    Whole-word masking groups a word's first piece with the continuation pieces after it.
    """
    return np.array([t.startswith(CONTINUATION_PREFIX) for t in self._tokens], dtype=bool)

  def encode(self, text):
    """Token ids of one string, without [CLS]/[SEP]."""
    return self._tokenizer.encode(text, add_special_tokens=False).ids

  def encode_batch(self, texts):
    """Token ids of many strings (tokenised in parallel), without [CLS]/[SEP].

    Args:
      texts: a list of strings.

    Returns:
      One list of int ids per string.
    """
    encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
    return [e.ids for e in encodings]

  def encode_batch_with_offsets(self, texts):
    """Token ids of many strings with each token's character span in the original string.

    Span QA (SQuAD) maps predicted tokens back to the exact context text through these; the
    spans refer to the text before normalisation (lowercasing, accent stripping).

    Args:
      texts: a list of strings.

    Returns:
      One (ids, offsets) pair per string: int32 [T] and int32 [T, 2] arrays, ``text[start:end]``
      being token ``i``'s source characters for ``(start, end) = offsets[i]``.
    """
    encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
    return [
      (np.asarray(e.ids, np.int32), np.asarray(e.offsets, np.int32).reshape(-1, 2))
      for e in encodings
    ]


def load_wordpiece(vocab_path, lowercase=True):
  """Loads a BERT ``vocab.txt`` as a :class:`WordPieceTokenizer`.

  Args:
    vocab_path: path of the vocab file (one token per line; line number = id).
    lowercase: True for uncased vocabs (lowercase and strip accents), False for cased ones.

  Returns:
    A tokenizer with ``encode_batch``, ``vocab_size`` and ``special_ids``.

  Raises:
    FileNotFoundError: the vocab file does not exist.
    ValueError: the vocab is empty, repeats a token or lacks a special token BERT needs.
  """
  return WordPieceTokenizer(read_vocab(vocab_path), lowercase=lowercase, vocab_path=vocab_path)


# SentencePiece marks the start of a word with this character.
_SENTENCEPIECE_WORD_START = "\u2581"


def read_sentencepiece(model_path):
  """A ``sentencepiece.SentencePieceProcessor`` of a ``.model`` file (local or gs://).

  Raises:
    FileNotFoundError: no such file.
    UserInputError: the file is not a SentencePiece model.
  """
  import sentencepiece  # pylint: disable=g-import-not-at-top

  if not files.is_file(model_path):
    raise FileNotFoundError(
      f"SentencePiece model {model_path} does not exist; train one with "
      "python -m bert_jax.tools.train_vocab --kind=sentencepiece"
    )
  try:
    return sentencepiece.SentencePieceProcessor(model_proto=files.read_bytes(model_path))
  except (RuntimeError, OSError) as e:
    raise UserInputError(
      f"{model_path} is not a SentencePiece model ({e}); pass a .model file from "
      "spm_train or train_vocab, or a WordPiece vocab.txt"
    ) from None


class SentencePieceTokenizer(Vocab):
  """A SentencePiece model (unigram or BPE) with BERT's special pieces, same interface.

  The model must hold [PAD], [UNK], [CLS], [SEP] and [MASK] as pieces (``train_vocab
  --kind=sentencepiece`` makes such models). Normalisation, lowercasing included, is fixed
  inside the model when it is trained.
  """

  def __init__(self, model_path, processor=None):
    """Loads the model (``processor``: the model already read by `read_sentencepiece`)."""
    self._processor = read_sentencepiece(model_path) if processor is None else processor
    processor = self._processor
    self._tokens = tuple(processor.id_to_piece(i) for i in range(processor.get_piece_size()))
    self._special_ids = special_token_ids(self._tokens, model_path)
    self._reserved = np.array(
      [
        processor.is_control(i)
        or processor.is_unknown(i)
        or processor.is_unused(i)
        or t in SPECIAL_TOKENS
        for i, t in enumerate(self._tokens)
      ],
      dtype=bool,
    )

  @property
  def lowercase(self):
    return False

  @property
  def first_regular_id(self):
    """The smallest id after the special and control pieces (random MLM replacements)."""
    ordinary = np.flatnonzero(~self._reserved)
    ordinary = ordinary[ordinary > max(dataclasses.astuple(self._special_ids))]
    if not len(ordinary):
      raise UserInputError(
        f"SentencePiece model of {len(self._tokens)} pieces has no ordinary "
        "pieces after its special ones"
      )
    return int(ordinary[0])

  def is_continuation(self):
    """True for pieces that continue a word: no leading word marker, not special."""
    return (
      np.array([not t.startswith(_SENTENCEPIECE_WORD_START) for t in self._tokens], dtype=bool)
      & ~self._reserved
    )

  def encode(self, text):
    return self._processor.encode(text, out_type=int)

  def encode_batch(self, texts):
    return self._processor.encode(list(texts), out_type=int)


def load_tokenizer(path, lowercase=True):
  """A WordPiece ``vocab.txt``, a SentencePiece ``.model`` or a BPE ``vocab.json``.

  Args:
    path: the vocab file; names ending in ``.model`` load as SentencePiece (XLM-R's layout,
      `bpe_tokenization.FairseqSentencePieceTokenizer`, when it has no BERT special pieces),
      ``.json`` as XLM's BPE (`xlm_tokenization.XlmTokenizer`) when it holds XLM's specials,
      else as RoBERTa's byte-level BPE, with ``merges.txt`` beside it.
    lowercase: WordPiece and XLM (SentencePiece models carry their own normalisation).

  Returns:
    A tokenizer of this module, `bpe_tokenization` or `xlm_tokenization`.
  """
  if path.endswith(".json"):
    if files.is_file(path) and _json_vocab_is_xlm(path):
      return xlm_tokenization.XlmTokenizer(path, lowercase=lowercase)
    return bpe_tokenization.ByteLevelBpeTokenizer(path)
  if path.endswith(".model"):
    processor = read_sentencepiece(path)
    if bpe_tokenization.is_fairseq_sentencepiece(processor):
      return bpe_tokenization.FairseqSentencePieceTokenizer(path, processor)
    return SentencePieceTokenizer(path, processor)
  return load_wordpiece(path, lowercase=lowercase)


def _json_vocab_is_xlm(path) -> bool:
  # pylint: disable-next=g-import-not-at-top (xlm_tokenization builds on this module)
  from bert_jax.data import xlm_tokenization

  try:
    vocab = json.loads(files.read_text(path))
  except (json.JSONDecodeError, UnicodeDecodeError):
    return False  # ByteLevelBpeTokenizer says what is wrong with the file.
  return isinstance(vocab, dict) and xlm_tokenization.is_xlm_vocab(vocab)


def load_model_tokenizer(path, *, lowercase=True, model_vocab_size=None, vocab_flag=""):
  """`load_tokenizer`, checked against the model it feeds: the one place a run, its data
  pipelines and the tools load their tokenizer.

  Args:
    path: the vocab file (WordPiece ``vocab.txt`` or SentencePiece ``.model``).
    lowercase: WordPiece only.
    model_vocab_size: the model's ``vocab_size``; None skips the check.
    vocab_flag: the flag that names the vocab, for the fix (default ``data.vocab_path``).

  Raises:
    UserInputError: the vocab's size is not the model's (the message names both fixes).
  """
  tokenizer = load_tokenizer(path, lowercase=lowercase)
  if model_vocab_size is not None and model_vocab_size != tokenizer.vocab_size:
    raise UserInputError(
      f"vocab {path} has {tokenizer.vocab_size} entries but model.vocab_size is "
      f"{model_vocab_size}; "
      + (
        f"pass the vocab the model was trained with ({vocab_flag})"
        if vocab_flag
        else f"set model.vocab_size={tokenizer.vocab_size} or point data.vocab_path at the "
        f"vocab the model was trained with ({model_vocab_size} entries)"
      )
    )
  return tokenizer
