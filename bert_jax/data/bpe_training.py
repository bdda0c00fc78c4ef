"""Training RoBERTa's byte-level BPE, XLM-R's SentencePiece unigram model and XLM's BPE on a
text file."""

import json
import posixpath

import tokenizers
from tokenizers import models, pre_tokenizers, trainers

from bert_jax.data import bpe_tokenization, files, xlm_tokenization


def train_byte_level_bpe(text_path: str, vocab_path: str, vocab_size: int) -> int:
  """Trains a byte-level BPE and writes ``vocab_path`` (vocab.json) and merges.txt beside it.

  The vocab is laid out as RoBERTa's: ``<s> <pad> </s> <unk>`` first, the 256 byte symbols,
  the merges, and ``<mask>`` last; ``vocab_size`` counts all of them.

  Returns:
    The number of entries written (smaller than asked when the text has too few merges).
  """
  tokenizer = tokenizers.Tokenizer(models.BPE())
  tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  trainer = trainers.BpeTrainer(
    vocab_size=vocab_size - 1,  # <mask> is appended after training, as fairseq's dictionary.
    min_frequency=2,
    special_tokens=list(bpe_tokenization.LEADING_SPECIALS),
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    show_progress=False,
  )
  lines = files.read_text(text_path).splitlines()
  tokenizer.train_from_iterator(lines, trainer)
  model = json.loads(tokenizer.to_str())["model"]
  vocab = dict(model["vocab"])
  vocab[bpe_tokenization.MASK] = len(vocab)
  merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
  files.write_text(vocab_path, json.dumps(vocab, ensure_ascii=False))
  files.write_text(
    bpe_tokenization.merges_path(vocab_path), "#version: 0.2\n" + "".join(m + "\n" for m in merges)
  )
  return len(vocab)


def train_fairseq_sentencepiece(text_path: str, model_path: str, vocab_size: int):
  """Trains XLM-R's kind of SentencePiece model (``<unk> <s> </s>`` first, no pad piece).

  It is a unigram language model, as XLM-R's published ``sentencepiece.bpe.model`` is despite
  its name (Conneau et al. 2020: "Sentence Piece with a unigram language model");
  transformers' ``XLMRobertaTokenizer(Fast)`` segments such a model as SentencePiece does,
  which it does not for a BPE one. Read through `bpe_tokenization.FairseqSentencePieceTokenizer` it has ``vocab_size`` entries:
  fairseq's four specials, the model's pieces after its first three, and ``<mask>``.
  """
  import sentencepiece  # pylint: disable=g-import-not-at-top

  prefix = posixpath.splitext(model_path)[0]
  sentencepiece.SentencePieceTrainer.train(
    input=text_path,
    model_prefix=prefix,
    vocab_size=vocab_size - 2,  # + <pad> and <mask> in fairseq's dictionary.
    model_type="unigram",
    unk_id=0,
    bos_id=1,
    eos_id=2,
    pad_id=-1,
    num_threads=1,
    shuffle_input_sentence=False,
    minloglevel=2,
  )


def train_xlm_bpe(text_path: str, vocab_path: str, vocab_size: int, lowercase: bool = True) -> int:
  """Trains XLM's kind of BPE and writes ``vocab_path`` (vocab.json) and merges.txt beside it.

  The text is tokenised as XLM's tokenizer does (`xlm_tokenization.MosesWords`, English rules)
  and each word's last symbol carries ``</w>``; the vocab opens with XLM's fourteen specials.

  Returns:
    The number of entries written (smaller than asked when the text has too few merges).
  """
  words = xlm_tokenization.MosesWords(lowercase=lowercase)
  tokenizer = tokenizers.Tokenizer(models.BPE(end_of_word_suffix=xlm_tokenization.END_OF_WORD))
  tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
  trainer = trainers.BpeTrainer(
    vocab_size=vocab_size,
    min_frequency=2,
    special_tokens=list(xlm_tokenization.SPECIALS),
    end_of_word_suffix=xlm_tokenization.END_OF_WORD,
    show_progress=False,
  )
  lines = files.read_text(text_path).splitlines()
  tokenizer.train_from_iterator((" ".join(words(line)) for line in lines), trainer)
  model = json.loads(tokenizer.to_str())["model"]
  merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
  files.write_text(vocab_path, json.dumps(model["vocab"], ensure_ascii=False))
  files.write_text(bpe_tokenization.merges_path(vocab_path), "".join(m + "\n" for m in merges))
  return len(model["vocab"])
