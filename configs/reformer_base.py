"""Reformer-style BERT-base: LSH attention, reversible layers, chunked FFN, MLM only, seq 4096.

  python -m bert_jax.main --config=configs/reformer_base.py --workdir=/tmp/reformer_base \
      --config.data.corpus_paths='("/data/books.txt",)' --config.data.vocab_path=/data/vocab.txt

For 16,384-token sequences (Kitaev et al. 2020 train up to 64K on one accelerator):
  --config.data.max_seq_length=16384 --config.model.max_position_embeddings=16384 \
  --config.data.max_predictions_per_seq=2458
Lengths must be multiples of model.lsh.chunk_len (64). n_buckets defaults to 2 * L / 64: 128
buckets at 4,096 (one random rotation), 512 at 16,384 (hashed factorised as 16 x 32, which
keeps hashing linear in length); set model.lsh.n_buckets to an int or a tuple of factors.
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.model.size = "base"  # L=12, H=768, A=12, intermediate 3072.
  config.model.attention_kind = "lsh"
  config.model.reversible = True  # Activation memory flat in depth (recomputed in backward).
  config.model.ffn_chunk_len = 512  # Never the whole [B, 4096, 3072] FFN activation at once.
  config.model.attention_dropout_rate = 0.0  # LSH attention has no probability dropout.
  config.model.max_position_embeddings = 4096
  config.model.lsh.chunk_len = 64
  config.model.lsh.n_hashes = 4  # 8 nearly matches full attention at twice the cost.
  config.data.max_seq_length = 4096
  config.data.max_predictions_per_seq = 615  # 15% of 4096.
  config.data.objective = "none"  # MLM only, as long-document models do (no NSP).
  config.global_batch_size = 64  # Sequences per update: 256K tokens, as BERT's 256 x 512 x 2.
  return config
