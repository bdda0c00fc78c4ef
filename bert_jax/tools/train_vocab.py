"""Trains a WordPiece vocab.txt or a SentencePiece model (unigram or BPE) from text files.

  python -m bert_jax.tools.train_vocab --input='/data/wiki/*.txt' --output=/data/vocab.txt \\
      --kind=wordpiece --vocab_size=30522
  python -m bert_jax.tools.train_vocab --input='/data/wiki/*.txt' --output=/data/sp.model \\
      --kind=sentencepiece --model_type=unigram --vocab_size=32000
  python -m bert_jax.tools.train_vocab --input='/data/wiki/*.txt' \\
      --output=/data/roberta/vocab.json --kind=bytelevel_bpe --vocab_size=50265
  python -m bert_jax.tools.train_vocab --input='/data/cc100/*.txt' \\
      --output=/data/xlmr/sentencepiece.bpe.model --kind=xlmr_sentencepiece --vocab_size=250002
  python -m bert_jax.tools.train_vocab --input='/data/wiki/*.txt' \\
      --output=/data/xlm/vocab.json --kind=xlm_bpe --vocab_size=30145

Both kinds hold BERT's special tokens [PAD] (id 0), [UNK], [CLS], [SEP] and [MASK], so either
file works as ``data.vocab_path`` or ``create_pretraining_data --vocab``. Training is
deterministic: WordPiece through ``wordpiece_training.train_wordpiece_vocab`` (uncased, with
its fixed ``##`` ids), SentencePiece with one thread and unshuffled input.

RoBERTa's and XLM-R's vocabs hold fairseq's specials instead (`data/bpe_training.py`):
``bytelevel_bpe`` writes vocab.json and merges.txt beside it (byte-level BPE), and
``xlmr_sentencepiece`` a SentencePiece unigram model (as XLM-R's published one) read with
fairseq's ids; ``--vocab_size`` counts every entry the model sees, ``<mask>`` included.
``xlm_bpe`` writes XLM's lowercased vocab.json and merges.txt (`data/xlm_tokenization.py`:
Moses words, ``</w>`` at each word's end, ``<special1>`` as the mask).
"""

import os
import shutil
import tempfile

from absl import flags, logging

from bert_jax.cli import runner
from bert_jax.data import bpe_training, text_corpus, tokenization, wordpiece_training
from bert_jax.errors import UserInputError

KINDS = ("wordpiece", "sentencepiece", "bytelevel_bpe", "xlmr_sentencepiece", "xlm_bpe")
MODEL_TYPES = ("unigram", "bpe")


def _joined_text(files, directory):
  """One UTF-8 text file with every input's lines; bad lines are skipped and counted."""
  path = os.path.join(directory, "input.txt")
  with open(path, "w", encoding="utf-8") as out:
    for file in files:
      documents, bad_lines = text_corpus.read_documents_from_file(file)
      for document in documents:
        out.write("\n".join(document) + "\n\n")
      if bad_lines:  # A binary file was refused by read_documents_from_file.
        logging.warning("%s: skipped %d lines that are not valid UTF-8", file, bad_lines)
  return path


def _check_size(inputs: str, entries: int, vocab_size: int):
  """A vocab smaller than asked means too little (or no real) text: refuse, write nothing."""
  if entries < vocab_size:
    raise UserInputError(
      f"--input={inputs} gives only {entries} vocab entries but --vocab_size={vocab_size} was "
      "asked; give more text or lower --vocab_size"
    )


def train(*, inputs, output, kind, vocab_size, model_type="unigram"):
  """Trains the vocab and writes it to ``output``; returns the loaded tokenizer."""
  if kind not in KINDS:
    raise UserInputError(f"--kind={kind!r}; choose one of {KINDS}")
  if model_type not in MODEL_TYPES:
    raise UserInputError(f"--model_type={model_type!r}; choose one of {MODEL_TYPES}")
  if kind in ("sentencepiece", "xlmr_sentencepiece") and not output.endswith(".model"):
    raise UserInputError(f"--output={output} must end in .model for a SentencePiece model")
  if kind in ("bytelevel_bpe", "xlm_bpe") and not output.endswith(".json"):
    raise UserInputError(f"--output={output} must be a vocab.json (merges.txt goes beside it)")
  if vocab_size < 16:
    raise UserInputError(f"--vocab_size={vocab_size} is too small; BERT uses 30522")
  files = text_corpus.expand_paths(inputs.split(","))
  os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
  with tempfile.TemporaryDirectory() as directory:
    text_path = _joined_text(files, directory)
    if kind == "bytelevel_bpe":
      entries = bpe_training.train_byte_level_bpe(text_path, output, vocab_size)
      _check_size(inputs, entries, vocab_size)
    elif kind == "xlm_bpe":
      entries = bpe_training.train_xlm_bpe(text_path, output, vocab_size)
      _check_size(inputs, entries, vocab_size)
    elif kind == "xlmr_sentencepiece":
      try:
        bpe_training.train_fairseq_sentencepiece(text_path, output, vocab_size)
      except RuntimeError as error:
        raise UserInputError(
          f"SentencePiece could not train on --input={inputs} ({str(error).strip()[:120]}); "
          "give more text or lower --vocab_size"
        ) from None
    elif kind == "wordpiece":
      tokens = wordpiece_training.train_wordpiece_vocab(text_path, vocab_size)
      _check_size(inputs, len(tokens), vocab_size)
      with open(output, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(t + "\n" for t in tokens))
    else:
      import sentencepiece  # pylint: disable=g-import-not-at-top

      prefix = os.path.join(directory, "sp")
      try:
        _train_sentencepiece(sentencepiece, text_path, prefix, vocab_size, model_type)
      except RuntimeError as error:  # SentencePiece's way of saying the text is too small.
        raise UserInputError(
          f"SentencePiece could not train on --input={inputs} ({str(error).strip()[:120]}); "
          "give more text or lower --vocab_size"
        ) from None
      shutil.copyfile(prefix + ".model", output)
  tokenizer = tokenization.load_tokenizer(output)
  logging.info("wrote %s: %d entries", output, tokenizer.vocab_size)
  return tokenizer


def _train_sentencepiece(sentencepiece, text_path, prefix, vocab_size, model_type):
  sentencepiece.SentencePieceTrainer.train(
    input=text_path,
    model_prefix=prefix,
    vocab_size=vocab_size,
    model_type=model_type,
    pad_id=0,
    unk_id=1,
    bos_id=-1,
    eos_id=-1,
    pad_piece="[PAD]",
    unk_piece="[UNK]",
    user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"],
    num_threads=1,
    shuffle_input_sentence=False,
    minloglevel=2,
  )


def _define_flags(values: flags.FlagValues):
  define = {"flag_values": values}
  flags.DEFINE_string("input", None, "Text files or globs, comma-separated.", **define)
  flags.DEFINE_string(
    "output",
    None,
    "vocab.txt (wordpiece), a .model (sentencepiece kinds) or vocab.json (bytelevel_bpe, xlm_bpe).",
    **define,
  )
  for name in ("input", "output"):
    flags.mark_flag_as_required(name, flag_values=values)
  flags.DEFINE_enum("kind", "wordpiece", KINDS, "Tokenizer to train.", **define)
  flags.DEFINE_enum(
    "model_type", "unigram", MODEL_TYPES, "SentencePiece kinds: the model type.", **define
  )
  flags.DEFINE_integer(
    "vocab_size", 30522, "Entries in the vocab, special tokens included.", **define
  )


def _train(values: flags.FlagValues):
  train(
    inputs=values.input,
    output=values.output,
    kind=values.kind,
    vocab_size=values.vocab_size,
    model_type=values.model_type,
  )


def main(argv=None) -> int:
  """Runs the tool on ``argv`` (default ``sys.argv``); returns the exit status."""
  logging.set_verbosity(logging.INFO)
  return runner.run(__doc__, _define_flags, _train, argv)


if __name__ == "__main__":
  raise SystemExit(main())
