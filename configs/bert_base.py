"""BERT-base pretraining with the paper's recipe (Devlin et al. 2019), sequence length 128.

  python -m bert_jax.main --config=configs/bert_base.py --workdir=/tmp/bert_base \
      --config.data.corpus_paths='("/data/wiki.txt",)' --config.data.vocab_path=/data/vocab.txt

The paper's schedule: 1M steps at batch 256; 90% of them at seq 128, then seq 512 (run again
with --config.data.max_seq_length=512 --config.data.max_predictions_per_seq=80).
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()  # L=12, H=768, A=12; AdamW lr 1e-4, 10k warmup, wd 0.01, batch 256.
  config.model.size = "base"
  return config
