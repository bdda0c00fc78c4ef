"""ELECTRA-Small pretraining with the paper's recipe (Clark et al. 2020), sequence length 128.

  python -m bert_jax.main --config=configs/electra_small.py --workdir=/tmp/electra_small \
      --config.data.corpus_paths='("/data/wiki.txt",)' --config.data.vocab_path=/data/vocab.txt

Discriminator L=12, H=256, A=4, E=128; generator 1/4 of its width; loss = MLM + 50 * RTD;
Adam lr 5e-4, batch 128, 1M steps, 10k warmup. Fine-tuning starts from the discriminator
(``--config.init_from=/tmp/electra_small``).
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.global_batch_size = 128  # Paper: 128 sequences of 128 tokens.
  config.model.family = "electra"  # Generator + discriminator, replaced-token detection.
  config.model.num_layers = 12
  config.model.hidden_size = 256
  config.model.num_heads = 4
  config.model.intermediate_size = 1024
  config.model.embedding_size = 128  # Shared tables, projected to 256 (and to the generator).
  config.model.electra.generator_fraction = 0.25  # Generator H=64, A=1, intermediate 256.
  config.model.electra.rtd_weight = 50.0  # The paper's lambda.
  config.data.objective = "none"  # No sentence-level task.
  # ELECTRA's generator input: 85% [MASK], 15% the original token, no random tokens.
  config.data.mask_token_prob = 0.85
  config.data.random_token_prob = 0.0
  config.data.max_seq_length = 128
  config.data.max_predictions_per_seq = 20  # 15% of 128.
  config.optimizer.learning_rate = 5e-4
  config.optimizer.warmup_steps = 10_000
  return config
