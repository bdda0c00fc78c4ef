"""SWAG multiple choice (BERT paper, section 4.4), BERT-base, fine-tuned.

  python -m bert_jax.main --config=configs/finetune/swag.py --workdir=/tmp/swag \
      --config.init_from=/ckpt/bert_base_uncased \
      --config.data.train_path=/data/swagaf/data/train.csv \
      --config.data.eval_path=/data/swagaf/data/val.csv

Each example becomes 4 sequences, [CLS] sent1 [SEP] sent2 + ending_i [SEP]; a score per choice
from the pooled [CLS] vector, softmax over the 4. TensorFlow Datasets has no SWAG builder, so
the data are SWAG's CSV files (github.com/rowanz/swagaf, data/train.csv and data/val.csv).
"""

from bert_jax.default_config import finetune_config


def get_config(arg=None):
  del arg
  config = finetune_config("multiple_choice")  # 10% warmup, eval at the end.
  config.global_batch_size = 16  # Examples (of 4 sequences each) per update: the paper's 16.
  config.num_train_epochs = 3.0  # The paper's 3 epochs.
  config.warmup_fraction = 0.1  # Linear warmup over the first 10% of steps, as in BERT.
  config.optimizer.learning_rate = 2e-5  # The paper's 2e-5.
  # The model (shape, vocab, family) is init_from's; BERT-base without init_from.
  # The paper gives no length; SWAG pairs are short (about 40 WordPieces), and the
  # pytorch-pretrained-BERT reproduction of this setup used 80. Longer pairs are truncated.
  config.data.max_seq_length = 80
  config.data.num_choices = 4  # ending0..ending3.
  return config
