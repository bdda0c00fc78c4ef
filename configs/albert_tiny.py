"""ALBERT-tiny (L=4 sharing one layer, H=128, E=64) on the embedded corpus: minutes on a CPU.

  python -m bert_jax.main --config=configs/albert_tiny.py --workdir=/tmp/albert_tiny

Sentence-order prediction, n-gram masking and LAMB as in ALBERT's recipe, at BERT-tiny's
width. Running the same command again resumes from the last checkpoint in the workdir.
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.num_train_steps = 2000
  config.global_batch_size = 32
  config.log_every_steps = 50
  config.eval_every_steps = 500
  config.checkpoint_every_steps = 250
  config.model.family = "albert"
  config.model.size = "tiny"  # H=128, A=2, intermediate 512.
  config.model.num_layers = 4  # Four applications of the one shared layer.
  config.model.embedding_size = 64  # Factorised embeddings: E=64 projected to H=128.
  config.model.albert.layer_sharing = "all"  # One layer's weights for all four.
  config.model.hidden_act = "gelu_new"  # ALBERT's tanh GELU.
  config.model.vocab_size = 8192  # The embedded corpus's vocab.txt.
  config.model.max_position_embeddings = 128
  config.model.hidden_dropout_rate = 0.0  # ALBERT trains without dropout.
  config.model.attention_dropout_rate = 0.0
  config.data.max_seq_length = 128
  config.data.max_predictions_per_seq = 20
  config.data.masking = "ngram"  # n <= 3 whole words, P(n) proportional to 1/n.
  config.data.objective = "sop"  # Sentence-order prediction.
  config.optimizer.name = "lamb"
  config.optimizer.learning_rate = 5e-3  # Small models take a larger step.
  config.optimizer.warmup_steps = 200
  return config
