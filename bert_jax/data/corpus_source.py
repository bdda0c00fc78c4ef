"""The text a pretraining config names (``data.corpus_paths`` or ``data.tfds_name``), read,
tokenised and split into train and held-out documents: what the masked-LM and the causal-LM
pipelines both start from.
"""

import dataclasses

from bert_jax.data import text_corpus, tfds_source, tokenized_corpus


@dataclasses.dataclass(frozen=True)
class CorpusSplits:
  """A tokenised corpus and its two splits.

  Attributes:
    corpus: every document.
    train: the train documents.
    eval: the held-out documents, or None when ``data.eval_fraction`` is 0.
  """

  corpus: tokenized_corpus.TokenizedDocuments
  train: tokenized_corpus.TokenizedDocuments
  eval: tokenized_corpus.TokenizedDocuments | None

  @property
  def num_held_out(self) -> int:
    """Documents held out for eval."""
    return 0 if self.eval is None else self.eval.num_documents


def read_splits(config, tokenizer) -> CorpusSplits:
  """Reads, tokenises and splits the config's text (the text files, or TFDS text).

  Args:
    config: a `PretrainingDataConfig`.
    tokenizer: its loaded tokenizer.

  Raises:
    UserInputError: an unreadable corpus, or too few documents for the split.
  """
  documents = (
    tfds_source.documents_for_config(config)
    if config.tfds_name
    else text_corpus.read_documents(config.resolved_corpus_paths())
  )
  corpus = tokenized_corpus.tokenize_documents(documents, tokenizer)
  train, held_out = corpus.split(config.eval_fraction)
  return CorpusSplits(corpus, train, held_out)
