"""XLNet-tiny (L=2, H=128): the permutation LM on the embedded English Wikipedia sample, CPU.

  python -m bert_jax.main --config=configs/xlnet_tiny.py --workdir=/tmp/xlnet_tiny

Each step draws a factorisation order per row; the pipeline's masked positions (15%, XLNet's
1/K with K about 6.7) come last in it and are predicted through the query stream. Running the
same command again resumes from the last checkpoint in the workdir.
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
  config.model.family = "xlnet"  # Relative attention, two streams, permutation LM.
  config.model.size = "tiny"  # L=2, H=128, A=2, intermediate 512.
  config.model.vocab_size = 8192  # The embedded corpus's vocab.txt.
  config.model.attention_kind = "dense"  # Ignored by xlnet (always relative attention).
  config.data.max_seq_length = 128  # Relative positions: no position table to outgrow.
  config.data.max_predictions_per_seq = 20  # 15% of 128: the predicted tail of each order.
  config.data.objective = "none"  # No sentence head: permutation LM only.
  config.optimizer.learning_rate = 1e-3  # Small models take a larger step.
  config.optimizer.warmup_steps = 200
  return config
