"""Training a BERT WordPiece vocab on a text file, reproducibly, with ``tokenizers``."""

import collections

import tokenizers
from tokenizers import models, normalizers, pre_tokenizers, trainers

from bert_jax.data import files

_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _character_inventory(lines, normalizer, pre_tokenizer, limit_alphabet):
  """Returns (alphabet, continuing characters): what the WordPiece trainer will need.

  The alphabet is the ``limit_alphabet`` most frequent characters of the normalised,
  pre-tokenised words (ties by code point); continuing characters are those of the alphabet that
  occur after the first character of some word, so need a ``##`` token.
  """
  counts = collections.Counter()
  continuing = set()
  for line in lines:
    for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(line)):
      counts.update(word)
      continuing.update(word[1:])
  ranked = sorted(counts, key=lambda c: (-counts[c], c))[:limit_alphabet]
  alphabet = sorted(ranked)
  return alphabet, [c for c in alphabet if c in continuing]


def train_wordpiece_vocab(text_path, vocab_size, limit_alphabet=1000):
  """Trains an uncased BERT WordPiece vocab on a text file; returns the tokens in id order.

  ``tokenizers`` numbers the ``##x`` tokens in hash-map order and breaks ties between equally
  frequent merges by token id, so two runs can give different vocabs (huggingface/tokenizers
  #1794). Registering every ``##x`` token up front, in a sorted order, fixes their ids and so
  makes the merges, and the whole vocab, reproducible.
  """
  tokenizer = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]"))
  tokenizer.normalizer = normalizers.BertNormalizer(
    clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
  )
  tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  # Read through `files` (local or gs://); strict UTF-8, so a binary file is refused.
  lines = files.read_text(text_path).splitlines(keepends=True)
  alphabet, continuing = _character_inventory(
    lines, tokenizer.normalizer, tokenizer.pre_tokenizer, limit_alphabet
  )
  continuing_tokens = ["##" + c for c in continuing]
  trainer = trainers.WordPieceTrainer(
    vocab_size=vocab_size,
    min_frequency=2,
    special_tokens=list(_SPECIAL_TOKENS) + continuing_tokens,
    initial_alphabet=alphabet,
    limit_alphabet=len(alphabet),
    continuing_subword_prefix="##",
    show_progress=False,
  )
  tokenizer.train_from_iterator(lines, trainer)
  vocab = tokenizer.get_vocab()
  if sorted(vocab.values()) != list(range(len(vocab))):
    raise RuntimeError("the trained WordPiece vocab has gaps in its ids")
  # Conventional BERT layout: special tokens, single characters, their ## forms, then merges.
  registered = set(_SPECIAL_TOKENS) | set(continuing_tokens)
  learned = [t for t in sorted(vocab, key=vocab.get) if t not in registered]
  singles = [t for t in learned if len(t) == 1]
  merges = [t for t in learned if len(t) != 1]
  return list(_SPECIAL_TOKENS) + singles + continuing_tokens + merges
