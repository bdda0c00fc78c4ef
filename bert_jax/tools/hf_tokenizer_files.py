"""A run's vocabulary written beside an exported Hugging Face model, under transformers' names.

WordPiece vocabs become ``vocab.txt``; RoBERTa's byte-level BPE ``vocab.json`` + ``merges.txt``,
XLM-R's ``sentencepiece.bpe.model`` and XLM's ``vocab.json`` + ``merges.txt`` are copied as they
are; each gets the ``tokenizer_config.json`` that names its transformers tokenizer class.
"""

import json

from absl import logging
from etils import epath

from bert_jax.data import bpe_tokenization, tokenization, xlm_tokenization
from bert_jax.tools import workdir_params

# A fairseq-style or XLM vocab's files under transformers' names, and its tokenizer class.
_BPE_TOKENIZER_FILES = {
  bpe_tokenization.ByteLevelBpeTokenizer: (("vocab.json", "merges.txt"), "RobertaTokenizer"),
  bpe_tokenization.FairseqSentencePieceTokenizer: (
    ("sentencepiece.bpe.model",),
    "XLMRobertaTokenizer",
  ),
  xlm_tokenization.XlmTokenizer: (("vocab.json", "merges.txt"), "XLMTokenizer"),
}


def write(directory, vocab_path, lowercase: bool, max_length: int, config: dict):
  """vocab.txt and tokenizer_config.json, when the run's vocab is a WordPiece vocab.txt;
  RoBERTa's vocab.json + merges.txt, XLM-R's sentencepiece.bpe.model or XLM's vocab.json +
  merges.txt likewise (``config``: the written config.json object)."""
  if vocab_path and vocab_path.endswith((".json", ".model")):
    tokenizer = tokenization.load_tokenizer(vocab_path, lowercase=lowercase)
    if type(tokenizer) in _BPE_TOKENIZER_FILES:
      names_, tokenizer_class = _BPE_TOKENIZER_FILES[type(tokenizer)]
      sources = [vocab_path, *bpe_tokenization.companion_files(vocab_path)]
      for source, name in zip(sources, names_):
        epath.Path(source).copy(directory / name)
      if isinstance(tokenizer, xlm_tokenization.XlmTokenizer):
        tokenizer_config = {
          "tokenizer_class": tokenizer_class,
          "do_lowercase_and_remove_accent": tokenizer.lowercase,
          "model_max_length": max_length,
          # The tokenizer names the model's languages too (XLMTokenizer's lang2id / id2lang).
          **{key: config[key] for key in ("lang2id", "id2lang") if config.get(key)},
        }
      else:
        # fairseq's vocabs go with positions counted past the padding index (RoBERTa).
        pad = config.get("pad_token_id", 1)
        tokenizer_config = {
          "tokenizer_class": tokenizer_class,
          "model_max_length": max_length - pad - 1,
        }
      (directory / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config, indent=2) + "\n"
      )
      return
  if vocab_path and not vocab_path.endswith(".model"):
    epath.Path(vocab_path).copy(directory / workdir_params.VOCAB_FILE)
    tokenizer_config = {
      "tokenizer_class": "BertTokenizer",
      "do_lower_case": lowercase,
      "model_max_length": max_length,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
  else:
    logging.warning(
      "no vocab.txt written: the run's vocab (%s) is not a WordPiece vocab.txt "
      "that exists; pass --vocab",
      vocab_path or "unknown",
    )
