"""XLM's translation LM on a CPU: a 2-layer XLM trained with TLM on a synthetic parallel corpus.

Generate the corpus (two made-up languages, a word recoverable only from its translation),
then train; the argument is the corpus directory:

  python -m bert_jax.tools.synthetic_pairs --output=/tmp/xlm_pairs
  python -m bert_jax.main --config=configs/xlm_tlm_tiny.py:/tmp/xlm_pairs \\
      --workdir=/tmp/xlm_tlm_tiny

``--config.data.objective=none`` trains MLM on each sentence alone (on this corpus a masked
word is unpredictable without its translation), ``clm`` a causal LM (with
``--config.model.causal=True``). Any TSV of real pairs works with its own vocab
(tools/train_vocab over the TSV gives a joint one) and ``data.pair_languages``.
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  corpus = arg or "/tmp/xlm_pairs"
  config = base_config()
  config.num_train_steps = 600
  config.global_batch_size = 64
  config.log_every_steps = 50
  config.eval_every_steps = 300
  config.checkpoint_every_steps = 300
  config.model.family = "xlm"
  config.model.num_layers = 2
  config.model.hidden_size = 64
  config.model.num_heads = 4
  config.model.intermediate_size = 256  # transformers' XLM: 4 x hidden.
  config.model.vocab_size = 45  # tools/synthetic_pairs' vocab: 5 special tokens + 2 x 20 words.
  config.model.max_position_embeddings = 32
  config.model.hidden_dropout_rate = 0.0
  config.model.attention_dropout_rate = 0.0
  config.model.xlm.languages = ("a", "b")  # Language ids 0 and 1 (lang2id).
  config.data.pairs_path = f"{corpus}/pairs.tsv"
  config.data.vocab_path = f"{corpus}/vocab.txt"
  config.data.pair_languages = ("a", "b")  # The TSV's columns.
  config.data.objective = "tlm"  # Both sentences, positions restart, masks in both.
  config.data.max_seq_length = 24  # [CLS] a [SEP] [CLS] b [SEP] of up to 8 words each.
  config.data.max_predictions_per_seq = 6
  config.data.eval_fraction = 0.05
  config.optimizer.learning_rate = 3e-3
  config.optimizer.warmup_steps = 50
  return config
