"""BERT-large pretraining with the paper's recipe (Devlin et al. 2019), sequence length 128.

  python -m bert_jax.main --config=configs/bert_large.py --workdir=/tmp/bert_large \
      --config.data.corpus_paths='("/data/wiki.txt",)' --config.data.vocab_path=/data/vocab.txt

No activation recomputation: batch 256 fits a v4-32 slice without it at seq 128 (7.60 GiB a
chip) and at seq 512 (13.39 GiB, where `auto` attention is the flash kernel), and a v5e-16 one
at seq 512 (13.51 of 15.75 GiB). libtpu's cost model puts the v4 steps 19% (seq 128) and 25%
(seq 512) faster than with `remat_policy=dots_no_batch`, the v5e seq-512 step 27% (168.8
against 214.9 ms). Where a larger batch does not fit, --config.model.remat_policy=dots_no_batch
does (`tools/aot_compile` says so before a run does).
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.model.size = "large"  # L=24, H=1024, A=16: 336M parameters with the heads.
  config.model.scan_layers = True  # 24 identical layers compile once.
  return config
