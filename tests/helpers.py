"""Shared test fixtures: small configs and synthetic batches with the pipeline's schema."""

from bert_jax.default_config import base_config


def small_config(**overrides):
  """A 2-layer, 4-head BERT small enough for CPU tests, shardable 8 ways."""
  config = base_config()
  config.num_train_steps = 20
  config.global_batch_size = 8
  config.log_every_steps = 2
  config.eval_every_steps = 10
  config.checkpoint_every_steps = 10
  config.model.size = "tiny"
  config.model.num_heads = 4
  config.model.vocab_size = 8192
  config.model.max_position_embeddings = 64
  config.data.max_seq_length = 32
  config.data.max_predictions_per_seq = 5
  config.optimizer.learning_rate = 1e-3
  config.optimizer.warmup_steps = 2
  for key, value in overrides.items():
    node = config
    *parents, leaf = key.split(".")
    for parent in parents:
      node = node[parent]
    node[leaf] = value
  return config
