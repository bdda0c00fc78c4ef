"""RoBERTa's and XLM-R's tokenizers, with the interface of `tokenization`'s BERT tokenizers.

- `ByteLevelBpeTokenizer`: GPT-2 / RoBERTa byte-level BPE from ``vocab.json`` + ``merges.txt``
  (found beside it), through the Rust ``tokenizers`` library; ids equal
  ``transformers.RobertaTokenizerFast``'s (no prefix space, ``<s>`` / ``</s>`` / ``<pad>`` /
  ``<unk>`` / ``<mask>`` as special tokens).
- `FairseqSentencePieceTokenizer`: XLM-R's ``sentencepiece.bpe.model`` with fairseq's ids:
  ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, SentencePiece's own pieces shifted by one,
  ``<mask>`` last; ids equal ``transformers.XLMRobertaTokenizerFast``'s.

Both put sentence pairs as ``<s> A </s></s> B </s>`` (`with_special_tokens`).
"""

import json
import posixpath

import numpy as np
import tokenizers
from tokenizers import decoders, models, pre_tokenizers

from bert_jax.data import files
from bert_jax.data.vocab_types import SpecialTokenIds, Vocab
from bert_jax.errors import UserInputError

MERGES_FILE = "merges.txt"
# RoBERTa's special tokens in id order (fairseq's dictionary); <mask> is the vocab's last entry.
LEADING_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
MASK = "<mask>"
# GPT-2's byte-level alphabet marks a leading space with this character.
_BYTE_LEVEL_SPACE = "\u0120"
_SENTENCEPIECE_WORD_START = "\u2581"
_SPM_OFFSET = 1  # fairseq puts <pad> before SentencePiece's pieces, shifting them by one.
_SPM_UNK = 0  # SentencePiece's <unk> id, which fairseq maps to its own <unk> (3).


def merges_path(vocab_path: str) -> str:
  """The ``merges.txt`` beside a ``vocab.json``."""
  return posixpath.join(posixpath.dirname(vocab_path), MERGES_FILE)


def companion_files(vocab_path: str) -> list[str]:
  """Files a vocab needs beside it: ``merges.txt`` for a byte-level BPE ``vocab.json``."""
  return [merges_path(vocab_path)] if vocab_path.endswith(".json") else []


class _Fairseq(Vocab):
  """What RoBERTa's and XLM-R's vocabs share: fairseq's special ids and pair format."""

  pair_separators = 2  # <s> A </s></s> B </s>

  def _set_specials(self, source):
    index = {token: i for i, token in enumerate(self._tokens)}
    missing = [t for t in LEADING_SPECIALS + (MASK,) if t not in index]
    if missing:
      raise UserInputError(
        f"{source} lacks {', '.join(missing)}; RoBERTa / XLM-R vocabs hold "
        f"{', '.join(LEADING_SPECIALS + (MASK,))}: pass the model's own vocab"
      )
    self._special_ids = SpecialTokenIds(
      pad=index["<pad>"], unk=index["<unk>"], cls=index["<s>"], sep=index["</s>"], mask=index[MASK]
    )
    self._special = np.zeros(len(self._tokens), bool)
    self._special[[index[t] for t in LEADING_SPECIALS + (MASK,)]] = True

  @property
  def lowercase(self):
    return False

  @property
  def first_regular_id(self):
    """The first id after the leading specials (random MLM replacements start there)."""
    return int(np.flatnonzero(~self._special)[0])

  def encode(self, text):
    """Token ids of one string, without ``<s>`` / ``</s>``."""
    return self.encode_batch([text])[0]


class ByteLevelBpeTokenizer(_Fairseq):
  """RoBERTa's byte-level BPE over ``vocab.json`` + ``merges.txt``."""

  def __init__(self, vocab_path):
    merges = merges_path(vocab_path)
    for path in (vocab_path, merges):
      if not files.is_file(path):
        raise FileNotFoundError(
          f"{path} does not exist; a byte-level BPE vocab is vocab.json with merges.txt beside "
          "it (train one with python -m bert_jax.tools.train_vocab --kind=bytelevel_bpe)"
        )
    try:
      vocab = json.loads(files.read_text(vocab_path))
      bpe = models.BPE(vocab, _read_merges(merges))
    except Exception as error:  # pylint: disable=broad-except (tokenizers raises plain ones)
      raise UserInputError(
        f"{vocab_path} / {MERGES_FILE} are not a byte-level BPE vocab ({str(error)[:80]}); pass "
        "RoBERTa's vocab.json with its merges.txt"
      ) from None
    self._tokens = tuple(sorted(vocab, key=vocab.get))
    if [vocab[t] for t in self._tokens] != list(range(len(vocab))):
      raise UserInputError(f"{vocab_path}: the ids are not 0..{len(vocab) - 1} without gaps")
    self._set_specials(vocab_path)
    tokenizer = tokenizers.Tokenizer(bpe)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(
      list(LEADING_SPECIALS) + [tokenizers.AddedToken(MASK, lstrip=True, special=True)]
    )
    self._tokenizer = tokenizer

  def is_continuation(self):
    """True for pieces that continue a word: no leading-space marker, not special."""
    return (
      np.array([not t.startswith(_BYTE_LEVEL_SPACE) for t in self._tokens], bool) & ~self._special
    )

  def encode_batch(self, texts):
    encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
    return [e.ids for e in encodings]


def _read_merges(path):
  """merges.txt's merge rules (a ``#version`` header line is skipped, as GPT-2's has one)."""
  lines = files.read_text(path).splitlines()
  return [tuple(line.split(" ")) for line in lines if line and not line.startswith("#version")]


class FairseqSentencePieceTokenizer(_Fairseq):
  """XLM-R's SentencePiece model read with fairseq's ids (see the module docstring)."""

  def __init__(self, model_path, processor):
    self._processor = processor
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    # SentencePiece's own <unk>, <s>, </s> (ids 0-2) give way to fairseq's four specials.
    self._tokens = LEADING_SPECIALS + tuple(pieces[3:]) + (MASK,)
    self._set_specials(model_path)

  def is_continuation(self):
    """True for pieces that continue a word: no leading word marker, not special."""
    marked = [t.startswith(_SENTENCEPIECE_WORD_START) for t in self._tokens]
    return ~np.array(marked, bool) & ~self._special

  def encode_batch(self, texts):
    unk = self._special_ids.unk
    return [
      [i + _SPM_OFFSET if i != _SPM_UNK else unk for i in ids]
      for ids in self._processor.encode(list(texts), out_type=int)
    ]


def is_fairseq_sentencepiece(processor) -> bool:
  """Whether a SentencePiece model is laid out as XLM-R's: ``<unk>``, ``<s>``, ``</s>`` first
  and none of BERT's ``[CLS]`` pieces."""
  first = [processor.id_to_piece(i) for i in range(min(3, processor.get_piece_size()))]
  return first == ["<unk>", "<s>", "</s>"] and processor.piece_to_id("[CLS]") == processor.unk_id()
