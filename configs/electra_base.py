"""ELECTRA-Base pretraining with the paper's recipe (Clark et al. 2020), sequence length 512.

  python -m bert_jax.main --config=configs/electra_base.py --workdir=/tmp/electra_base \
      --config.data.corpus_paths='("/data/wiki.txt",)' --config.data.vocab_path=/data/vocab.txt

Discriminator L=12, H=768, A=12 (E=H, no projection); generator 1/3 of its width; loss =
MLM + 50 * RTD; Adam lr 2e-4, batch 256, 766k steps, 10k warmup. Fine-tuning starts from the
discriminator (``--config.init_from=/tmp/electra_base``).
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.num_train_steps = 766_000  # The paper's base schedule.
  config.global_batch_size = 256
  config.model.family = "electra"  # Generator + discriminator, replaced-token detection.
  config.model.size = "base"  # L=12, H=768, A=12, intermediate 3072.
  config.model.electra.generator_fraction = 1 / 3  # Generator H=256, A=4, intermediate 1024.
  config.model.electra.rtd_weight = 50.0  # The paper's lambda.
  config.data.objective = "none"  # No sentence-level task.
  # ELECTRA's generator input: 85% [MASK], 15% the original token, no random tokens.
  config.data.mask_token_prob = 0.85
  config.data.random_token_prob = 0.0
  config.data.max_seq_length = 512
  config.data.max_predictions_per_seq = 80  # 15% of 512, rounded up as BERT's recipe does.
  config.optimizer.learning_rate = 2e-4
  config.optimizer.warmup_steps = 10_000
  return config
