"""BERT-tiny (L=2, H=128) on the embedded English Wikipedia sample: minutes on a laptop CPU.

  python -m bert_jax.main --config=configs/bert_tiny.py --workdir=/tmp/bert_tiny

Running the same command again resumes from the last checkpoint in the workdir.
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.num_train_steps = 2000
  config.global_batch_size = 32
  config.log_every_steps = 50
  config.eval_every_steps = 500
  config.checkpoint_every_steps = 250
  config.model.size = "tiny"  # L=2, H=128, A=2, intermediate 512.
  config.model.vocab_size = 8192  # The embedded corpus's vocab.txt.
  config.model.max_position_embeddings = 128
  config.data.max_seq_length = 128
  config.data.max_predictions_per_seq = 20
  config.optimizer.learning_rate = 1e-3  # Small models take a larger step.
  config.optimizer.warmup_steps = 200
  return config
