"""The data slice of a pretraining config, built once at the settings boundary.

Every key's default and description are declared here (`bert_jax.config_fields.option`);
`bert_jax.default_config` builds the ConfigDict's ``data`` section from them.
"""

import dataclasses

from bert_jax import names
from bert_jax.config_fields import option
from bert_jax.data import default_corpus, sentence_pairs, tfds_source
from bert_jax.errors import UserInputError

# How rows are made from the text: BERT's sentence pairs, or RoBERTa's FULL-SENTENCES.
PACKINGS = ("pairs", "full_sentences")


@dataclasses.dataclass(frozen=True)
class PretrainingDataConfig:
  """The data slice of a pretraining config: where the text is and how it becomes examples."""

  corpus_paths: tuple[str, ...] = option(
    (),
    help="Text files or globs (sentence per line, blank line between documents, .gz allowed); "
    "empty = the embedded English Wikipedia sample.",
  )
  vocab_path: str = option(
    "", help="WordPiece vocab.txt or SentencePiece .model; empty = the embedded 8192 vocab."
  )
  lowercase: bool = option(True, help="Uncased tokenisation; False for cased vocabs.")
  max_seq_length: int = option(128, help="Tokens per sequence, [CLS] and [SEP]s included.")
  max_predictions_per_seq: int = option(
    20, help="Masked-LM prediction slots per sequence (BERT: 20 at length 128, 80 at 512)."
  )
  mask_prob: float = option(0.15, help="Share of tokens chosen for MLM.")
  mask_token_prob: float = option(
    0.8, help="Share of chosen tokens shown as [MASK] (BERT: 0.8; ELECTRA: 0.85)."
  )
  random_token_prob: float = option(
    0.1,
    help="Share of chosen tokens shown as a random token; the rest stay as they are "
    "(BERT: 0.1; ELECTRA: 0, its generator sees [MASK] or the original).",
  )
  short_seq_prob: float = option(0.1, help="Share of sequences made shorter than the maximum.")
  eval_fraction: float = option(
    0.05, help="Share of documents held out for eval (independent of the seed); 0 = none."
  )
  num_eval_examples: int | None = option(
    None,
    help="Eval examples (a fixed sample; unset = every held-out pair), rounded down to whole "
    "global batches.",
    config_type=int,
  )
  masking: str = option(
    "token", help="token (BERT) | whole_word (all pieces of a word) | span (SpanBERT)."
  )
  single_sentence_next: bool = option(
    True,
    help="True keeps NSP labels near 50/50; False is BERT's exact pairing (skewed to random).",
  )
  objective: str = option(
    "nsp",
    help="Sentence-level objective: nsp (BERT) | sop (ALBERT sentence order) | none (MLM only; "
    "the sentence head is dropped) | clm (causal LM) | tlm (XLM translation LM on pairs_path).",
  )
  pairs_path: str = option(
    "",
    help="family xlm: TSV glob of parallel pairs (source<TAB>target per line); it replaces "
    "corpus_paths for MLM (none), CLM and TLM.",
  )
  pair_languages: tuple[str, ...] = option(
    (), help="family xlm: the languages of pairs_path's two columns, e.g. ('en', 'fr')."
  )
  packing: str = option(
    "pairs",
    help="pairs (BERT: one or two segments per row) | full_sentences (RoBERTa: rows filled "
    "with whole sentences across documents, [SEP] / </s> after each; objective none).",
  )
  span_geometric_p: float = option(
    0.2, help="span: span length in words ~ Geometric(p) (SpanBERT: 0.2)."
  )
  max_span_length: int = option(10, help="span: spans clipped to this many words (SpanBERT: 10).")
  tfrecord_pattern: str = option(
    "",
    help="Comma-separated globs of tools/create_pretraining_data TFRecords; set = they replace "
    "corpus_paths (vocab_path must be their vocab).",
  )
  eval_tfrecord_pattern: str = option("", help="Its eval-*.tfrecord shards; empty = no eval.")
  shuffle_buffer_size: int = option(10_000, help="TFRecords: records per process's shuffle buffer.")
  tfds_name: str = option(
    "",
    help="A TFDS text dataset prepared locally (e.g. wikipedia/20230601.en); set = it replaces "
    "corpus_paths, one example = one document. Never downloaded.",
  )
  tfds_split: str = option("train", help='Its split ("train[:10%]" slices allowed).')
  tfds_text_key: str = option("text", help="Its string feature holding each document's text.")
  tfds_data_dir: str = option("", help="Its TFDS data folder; empty = TFDS_DATA_DIR.")
  tfds_max_documents: int = option(0, help="Read at most this many documents; 0 = all.")

  def __post_init__(self):
    for key in ("corpus_paths", "pair_languages"):
      value = getattr(self, key)
      object.__setattr__(self, key, (value,) if isinstance(value, str) else tuple(value))
    sentence_pairs.check_max_seq_length(self.max_seq_length)
    # The causal LM predicts every next token; the masked slots do not apply to it.
    if self.objective != names.CLM and not 1 <= self.max_predictions_per_seq <= self.max_seq_length:
      raise UserInputError(
        f"data.max_predictions_per_seq is {self.max_predictions_per_seq}; it must be in "
        f"[1, max_seq_length={self.max_seq_length}] (BERT: 20 at length 128, 80 at 512)"
      )
    if not 0.0 < self.mask_prob <= 1.0:
      raise UserInputError(f"data.mask_prob is {self.mask_prob}; it must be in (0, 1] (BERT: 0.15)")
    if min(self.mask_token_prob, self.random_token_prob) < 0 or (
      self.mask_token_prob + self.random_token_prob > 1.0
    ):
      raise UserInputError(
        f"data.mask_token_prob={self.mask_token_prob} and data.random_token_prob="
        f"{self.random_token_prob} must be >= 0 and sum to at most 1 (BERT: 0.8 and 0.1)"
      )
    if not 0.0 <= self.eval_fraction < 1.0:
      raise UserInputError(f"data.eval_fraction is {self.eval_fraction}; it must be in [0, 1)")
    if not 0.0 <= self.short_seq_prob <= 1.0:
      raise UserInputError(f"data.short_seq_prob is {self.short_seq_prob}; it must be in [0, 1]")
    if self.num_eval_examples is not None and self.num_eval_examples < 1:
      raise UserInputError(
        f"data.num_eval_examples is {self.num_eval_examples}; use None for all or a count >= 1"
      )
    if self.masking not in names.MASKING_STRATEGIES:
      raise UserInputError(
        f"data.masking is {self.masking!r}; choose one of {sorted(names.MASKING_STRATEGIES)}"
      )
    if self.shuffle_buffer_size < 0:
      raise UserInputError(
        f"data.shuffle_buffer_size is {self.shuffle_buffer_size}; use 0 (no shuffling) or more"
      )
    objectives = sentence_pairs.OBJECTIVES + (names.CLM, names.TLM)
    if self.objective not in objectives:
      raise UserInputError(f"data.objective is {self.objective!r}; choose one of {objectives}")
    if self.packing not in PACKINGS:
      raise UserInputError(f"data.packing is {self.packing!r}; choose one of {PACKINGS}")
    if self.packing == "full_sentences" and (self.objective != "none" or self.tfrecord_pattern):
      raise UserInputError(
        "data.packing='full_sentences' packs the text corpus for MLM only: set "
        "data.objective='none' and no data.tfrecord_pattern (records made with "
        "create_pretraining_data --style=full_sentences are packed already)"
      )
    if not 0.0 < self.span_geometric_p <= 1.0 or self.max_span_length < 1:
      raise UserInputError(
        f"data.span_geometric_p={self.span_geometric_p} must be in (0, 1] and "
        f"data.max_span_length={self.max_span_length} at least 1 (SpanBERT: 0.2 and 10)"
      )
    tfds_source.check_config(self)

  def resolved_corpus_paths(self):
    return self.corpus_paths or (default_corpus.default_corpus_path(),)

  def resolved_vocab_path(self):
    return self.vocab_path or default_corpus.default_vocab_path()
