"""ELECTRA-tiny (discriminator L=2, H=128, E=64; generator 1/4 width) on the embedded corpus: CPU.

  python -m bert_jax.main --config=configs/electra_tiny.py --workdir=/tmp/electra_tiny

Running the same command again resumes from the last checkpoint in the workdir. Fine-tune the
discriminator with ``--config.init_from=/tmp/electra_tiny`` on a fine-tuning config.

What to expect (docs/benchmarks.md; about 28 min on 2 cores): the generator learns the
corpus's unigram distribution within ~200 steps, after which a replacement can only be told from
the original by context. The discriminator's loss drops below the constant guess's first; its
accuracy on the training stream passes rtd_baseline_accuracy (all "original") from step ~5,000
(step 8,000: 0.876 vs 0.873, rtd_auc 0.59). On the 5 held-out documents rtd_auc is 0.53 but the
accuracy stays below the baseline: most tokens it wrongly flags there never occur in the 92
training documents. With near-uniform samples (``--config.model.electra.sampling_temperature=100``)
it beats the baseline within 300 steps.
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.num_train_steps = 8000
  config.global_batch_size = 32
  config.log_every_steps = 50
  config.eval_every_steps = 1000
  config.checkpoint_every_steps = 1000
  config.model.family = "electra"  # Generator + discriminator (replaced-token detection).
  config.model.size = "tiny"  # Discriminator L=2, H=128, A=2, intermediate 512.
  config.model.embedding_size = 64  # Shared embedding tables, projected to 128 / to 32.
  config.model.electra.generator_fraction = 0.25  # Generator H=32, A=1, intermediate 128.
  config.model.electra.rtd_weight = 50.0  # loss = MLM + 50 * RTD (the paper's lambda).
  config.model.vocab_size = 8192  # The embedded corpus's vocab.txt.
  config.model.max_position_embeddings = 128
  config.data.objective = "none"  # ELECTRA has no sentence-level head.
  # ELECTRA's generator input: 85% [MASK], 15% the original token, no random tokens.
  config.data.mask_token_prob = 0.85
  config.data.random_token_prob = 0.0
  config.data.max_seq_length = 128
  config.data.max_predictions_per_seq = 20
  config.optimizer.learning_rate = 1e-3  # Small models take a larger step.
  config.optimizer.warmup_steps = 200
  return config
