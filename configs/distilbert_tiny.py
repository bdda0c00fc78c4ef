"""DistilBERT-style distillation on a CPU: a 1-layer student from the 2-layer BERT-tiny teacher.

Train the teacher first (configs/bert_tiny.py), then distil it; the argument is its workdir:

  python -m bert_jax.main --config=configs/bert_tiny.py --workdir=/tmp/bert_tiny
  python -m bert_jax.main --config=configs/distilbert_tiny.py:/tmp/bert_tiny \\
      --workdir=/tmp/distilbert_tiny

The student (model.family=distilbert: no token types, no pooler) has half the teacher's layers
and starts from every other one (distillation.student_init). Running the same command again
resumes; a checkpoint records its teacher's path and fingerprint and refuses another teacher.
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  config = base_config()
  config.task = "distillation"  # Student trained against a frozen teacher (tasks/distillation.py).
  config.num_train_steps = 2000
  config.global_batch_size = 32
  config.log_every_steps = 50
  config.eval_every_steps = 500
  config.checkpoint_every_steps = 250
  config.model.family = "distilbert"  # BERT blocks without token types and pooler.
  config.model.size = "tiny"  # Width of BERT-tiny (H=128, A=2, intermediate 512) ...
  config.model.num_layers = 1  # ... and half its 2 layers.
  config.model.vocab_size = 8192  # The embedded corpus's vocab.txt, as the teacher's.
  config.model.max_position_embeddings = 128
  config.data.max_seq_length = 128
  config.data.max_predictions_per_seq = 20
  config.data.objective = "none"  # DistilBERT drops NSP: single segments, MLM positions only.
  config.optimizer.learning_rate = 1e-3  # Small models take a larger step.
  config.optimizer.warmup_steps = 200
  config.distillation.teacher = arg or "/tmp/bert_tiny"  # The teacher's workdir.
  config.distillation.temperature = 2.0  # Sanh et al.'s T.
  config.distillation.soft_weight = 5.0  # alpha: T^2 x soft cross-entropy.
  config.distillation.mlm_weight = 2.0  # beta: masked LM.
  config.distillation.cosine_weight = 1.0  # gamma: cosine of the last hidden states.
  config.distillation.student_init = "every_other_layer"  # Student layer i <- teacher 2i.
  return config
