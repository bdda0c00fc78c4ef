"""RoBERTa-tiny (L=2, H=128) on the embedded English Wikipedia sample with its own byte-level
BPE: minutes on a laptop CPU.

  python -m bert_jax.tools.train_vocab --input=bert_jax/data/corpus/enwiki_sample.txt \\
      --output=/tmp/roberta_vocab/vocab.json --kind=bytelevel_bpe --vocab_size=8192
  python -m bert_jax.main --config=configs/roberta_tiny.py --workdir=/tmp/roberta_tiny

The argument is the vocab.json (default /tmp/roberta_vocab/vocab.json, merges.txt beside it):
``--config=configs/roberta_tiny.py:/data/vocab.json``. RoBERTa's recipe (FULL-SENTENCES rows,
dynamic masking, no NSP, Adam beta2 0.98, no clipping) at BERT-tiny's size and a larger step.
"""

import importlib.util
import pathlib

# roberta_base.py sits beside this file; configs/ is not a package, so load it by path.
_SPEC = importlib.util.spec_from_file_location(
  "roberta_base", pathlib.Path(__file__).with_name("roberta_base.py")
)
roberta_base = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(roberta_base)


def get_config(arg=None):
  config = roberta_base.get_config()  # RoBERTa's recipe, then a CPU-sized run.
  config.num_train_steps = 2000
  config.global_batch_size = 32
  config.log_every_steps = 50
  config.eval_every_steps = 500
  config.checkpoint_every_steps = 250
  config.model.size = "tiny"  # L=2, H=128, A=2, intermediate 512.
  config.model.vocab_size = 8192  # train_vocab --vocab_size=8192 above.
  config.model.max_position_embeddings = 130  # 128 tokens past the padding index.
  config.data.vocab_path = arg or "/tmp/roberta_vocab/vocab.json"  # Byte-level BPE.
  config.data.max_seq_length = 128
  config.data.max_predictions_per_seq = 20  # 15% of 128.
  config.optimizer.learning_rate = 1e-3  # Small models take a larger step.
  config.optimizer.warmup_steps = 200
  return config
