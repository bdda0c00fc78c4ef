"""Where the embedded default corpus lives: English Wikipedia prose and its WordPiece vocab.

The files ship as package data in ``bert_jax/data/corpus/`` (see its ``ATTRIBUTION.md`` for the
source, licence and the command that regenerates them), so ``configs/bert_tiny.py`` runs with no
download and tests have real text to work on.
"""

import importlib.resources

_REGENERATE = "pip install gensim==4.4.0 && python -m bert_jax.tools.build_default_corpus"


def _corpus_file(name):
  path = importlib.resources.files("bert_jax.data").joinpath("corpus", name)
  if not path.is_file():
    raise FileNotFoundError(
      f"the embedded default corpus file corpus/{name} is missing from bert_jax.data; "
      f"reinstall bert_jax or regenerate it with: {_REGENERATE}"
    )
  return str(path)


def default_corpus_path():
  """Returns the path of ``enwiki_sample.txt``: one sentence per line, blank line between docs."""
  return _corpus_file("enwiki_sample.txt")


def default_vocab_path():
  """Returns the path of the uncased 8192-entry WordPiece ``vocab.txt`` trained on that text."""
  return _corpus_file("vocab.txt")
