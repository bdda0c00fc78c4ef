"""ALBERT-large pretraining with the paper's recipe (Lan et al. 2020), sequence length 512.

  python -m bert_jax.main --config=configs/albert_large.py --workdir=/tmp/albert_large \
      --config.data.corpus_paths='("/data/wiki.txt",)' --config.data.vocab_path=/data/30k-clean.model \
      --config.model.vocab_size=30000

L=24, H=1024, A=16, E=128, all layers sharing one set of weights: 17.8M parameters with the
heads (Hugging Face's AlbertForPreTraining of the same config has exactly as many). LAMB at
lr 0.00176, batch 4096, 125k steps, no dropout, n-gram masking (n <= 3), sentence-order
prediction.
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.num_train_steps = 125_000  # The paper's schedule.
  config.global_batch_size = 4096  # Sequences per update.
  config.model.family = "albert"
  config.model.size = "large"  # L=24, H=1024, A=16, intermediate 4096.
  config.model.embedding_size = 128  # Factorised embeddings: E=128 projected to H.
  config.model.albert.layer_sharing = "all"  # One layer's weights, applied 24 times.
  config.model.hidden_act = "gelu_new"  # The tanh GELU of ALBERT's code (HF's ALBERT v2).
  config.model.vocab_size = 30000  # ALBERT's SentencePiece vocab; must match data.vocab_path.
  config.model.hidden_dropout_rate = 0.0  # ALBERT trains without dropout.
  config.model.attention_dropout_rate = 0.0
  config.data.max_seq_length = 512  # ALBERT pretrains at 512 (10% of pairs shorter).
  config.data.max_predictions_per_seq = 20  # As ALBERT's data tool.
  config.data.masking = "ngram"  # n-grams of n <= 3 whole words, P(n) proportional to 1/n.
  config.data.objective = "sop"  # Sentence-order prediction (swapped consecutive segments).
  config.optimizer.name = "lamb"  # Large-batch optimiser.
  config.optimizer.learning_rate = 0.00176  # Peak, after warmup.
  config.optimizer.warmup_steps = 3125  # As ALBERT's released recipe.
  return config
