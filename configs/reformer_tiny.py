"""Long-sequence CPU Reformer: tiny width, LSH attention over 1024 tokens, reversible layers.

  python -m bert_jax.main --config=configs/reformer_tiny.py --workdir=/tmp/reformer_tiny

Trains on the embedded English Wikipedia sample in minutes on a laptop CPU (MLM only);
running the same command again resumes from the last checkpoint in the workdir.
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.num_train_steps = 500
  config.global_batch_size = 8
  config.log_every_steps = 10
  config.eval_every_steps = 250
  config.checkpoint_every_steps = 250
  config.model.size = "tiny"  # L=2, H=128, A=2, intermediate 512.
  config.model.vocab_size = 8192  # The embedded corpus's vocab.txt.
  config.model.attention_kind = "lsh"
  config.model.reversible = True
  config.model.ffn_chunk_len = 256
  config.model.attention_dropout_rate = 0.0  # LSH attention has no probability dropout.
  config.model.max_position_embeddings = 1024
  config.model.lsh.chunk_len = 64
  config.model.lsh.n_hashes = 2
  config.data.max_seq_length = 1024
  config.data.max_predictions_per_seq = 154  # 15% of 1024.
  config.data.objective = "none"  # MLM only.
  config.optimizer.learning_rate = 1e-3  # Small models take a larger step.
  config.optimizer.warmup_steps = 50
  return config
