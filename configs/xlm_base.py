"""XLM-15 with TLM (Lample & Conneau 2019's XNLI model: L=12, H=1024, A=8, 15 languages).

  python -m bert_jax.main --config=configs/xlm_base.py --workdir=/tmp/xlm_base \\
      --config.data.pairs_path='/data/para/en-fr.train.tsv' --config.data.pair_languages='("en","fr")' \\
      --config.data.vocab_path=/data/xlm15_vocab.txt

The sizes are transformers' ``xlm-mlm-tlm-xnli15-1024`` (12 layers, ``emb_dim`` 1024, 8 heads,
FFN 4 x 1024, learned positions, GELU, dropout 0.1, 95,000-entry BPE vocab, 15 language
embeddings): 249,071,384 parameters with the tied LM head, as transformers counts. The optimizer is the paper's Adam with
lr 1e-4 (XLM's code: beta2 0.98, 4,000 warmup steps; its inverse-square-root decay is linear
decay here). The paper alternates MLM on monolingual streams of 256 tokens with TLM on pairs;
this config trains TLM on one language pair of a TSV (one pair per sequence, at most 256 tokens
for both sentences); switch to ``data.objective=none`` (MLM on each sentence alone) or ``clm``
(with ``model.causal=True``) on the same data. Batch: 64 sequences per GPU on 64 GPUs in the
paper; 512 here.
"""

from bert_jax.default_config import base_config

# XNLI's 15 languages in xlm-mlm-tlm-xnli15-1024's lang2id order.
XNLI15 = ("ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh")


def get_config(arg=None):
  del arg
  config = base_config()
  config.num_train_steps = 500_000
  config.global_batch_size = 512
  config.model.family = "xlm"
  config.model.num_layers = 12
  config.model.hidden_size = 1024
  config.model.num_heads = 8
  config.model.intermediate_size = 4096  # transformers' XLM fixes 4 x hidden.
  config.model.vocab_size = 95_000  # XLM-15's BPE vocab (pass its vocab via data.vocab_path).
  config.model.max_position_embeddings = 512
  config.model.xlm.languages = XNLI15
  config.data.pair_languages = ("en", "fr")
  config.data.objective = "tlm"  # Both sentences, positions restart, masks in both.
  config.data.max_seq_length = 256  # XLM's streams of 256 tokens.
  config.data.max_predictions_per_seq = 40  # 15% of 256.
  config.optimizer.name = "adamw"
  config.optimizer.learning_rate = 1e-4
  config.optimizer.b2 = 0.98
  config.optimizer.warmup_steps = 4000
  config.optimizer.weight_decay = 0.0  # XLM's Adam has no weight decay.
  return config
