"""XLNet-large (Yang et al. 2019: L=24, H=1024, A=16): the permutation LM at sequence length 512.

  python -m bert_jax.main --config=configs/xlnet_large.py --workdir=/tmp/xlnet_large \
      --config.data.corpus_paths='("/data/wiki.txt",)' --config.data.vocab_path=/data/spiece.model

Predicts 85 of every 512 tokens (the paper's num_predict; K = 6) through the query stream,
each row under its own sampled factorisation order. The paper also carries a 384-token memory
across segments (mem_len 384, reuse_len 256); this config pretrains without it.
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.model.family = "xlnet"  # Relative attention, two streams, permutation LM.
  config.model.size = "large"  # L=24, H=1024, A=16, intermediate 4096.
  config.model.vocab_size = 32000  # XLNet's SentencePiece vocab (pass its spiece.model).
  config.model.attention_kind = "dense"  # Ignored by xlnet (always relative attention).
  config.data.max_seq_length = 512  # The paper's pretraining length.
  config.data.max_predictions_per_seq = 85  # The predicted tail of each order (num_predict).
  config.data.mask_prob = 0.166  # 85 / 512: about 1/K of the tokens, K = 6.
  config.data.objective = "none"  # No sentence head: permutation LM only.
  config.global_batch_size = 256  # Smaller than the paper's 8192 (512 TPU v3 chips).
  return config
