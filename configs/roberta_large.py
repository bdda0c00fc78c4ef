"""RoBERTa-large pretraining with the paper's recipe (Liu et al. 2019), sequence length 512.

  python -m bert_jax.main --config=configs/roberta_large.py --workdir=/tmp/roberta_large \\
      --config.data.corpus_paths='("/data/text/*.txt",)' \\
      --config.data.vocab_path=/data/roberta/vocab.json

configs/roberta_base.py's recipe at L=24, H=1024, A=16: peak lr 4e-4 after 30k warmup steps,
batch 8k for 500k steps. 355,412,057 parameters (Hugging Face's RobertaForMaskedLM).
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
  config = roberta_base.get_config(arg)  # The base recipe, then what large changes.
  config.model.size = "large"  # L=24, H=1024, A=16, intermediate 4096.
  config.optimizer.learning_rate = 4e-4  # Peak, after warmup (large).
  config.optimizer.warmup_steps = 30_000  # Then linear decay to 0.
  return config
