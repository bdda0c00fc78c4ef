"""BERT-large pretraining with the paper's recipe (Devlin et al. 2019), sequence length 128.

  python -m bert_jax.main --config=configs/bert_large.py --workdir=/tmp/bert_large \
      --config.data.corpus_paths='("/data/wiki.txt",)' --config.data.vocab_path=/data/vocab.txt
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.model.size = "large"  # L=24, H=1024, A=16: 336M parameters with the heads.
  config.model.remat_policy = "dots_no_batch"  # Fits batch 256 with fewer chips.
  config.model.scan_layers = True  # 24 identical layers compile once.
  return config
