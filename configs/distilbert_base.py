"""DistilBERT (Sanh et al. 2019): 6 layers of BERT-base width distilled from a BERT-base teacher.

The teacher is a bert_jax BERT-base workdir or Hugging Face weights converted into one:

  python -m bert_jax.tools.convert --from=hf --input=/models/bert-base-uncased \\
      --output=/runs/bert_base_hf
  python -m bert_jax.main --config=configs/distilbert_base.py:/runs/bert_base_hf \\
      --workdir=/runs/distilbert_base --config.data.corpus_paths=/data/wiki.txt

Compiling the step for a TPU slice ahead of time needs only the teacher's config.json (no
weights): a directory holding a copy of it will do as the argument.

  python -m bert_jax.tools.aot_compile --config=configs/distilbert_base.py:/runs/bert_base_hf \\
      --topology=v4-8

The student starts from every other teacher layer (0, 2, ..., 10) with the teacher's
embeddings and MLM head; loss = 5.0 x T^2 x soft CE (T=2) + 2.0 x MLM + 1.0 x (1 - cosine).
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  config = base_config()
  config.task = "distillation"  # Student trained against a frozen teacher (tasks/distillation.py).
  config.num_train_steps = 200_000  # Sanh et al.: ~3 passes over their corpus at large batch.
  config.global_batch_size = 4096  # Sanh et al.: "up to 4K examples per batch".
  config.log_every_steps = 100
  config.eval_every_steps = 10_000
  config.checkpoint_every_steps = 5000
  config.model.family = "distilbert"  # BERT blocks without token types and pooler.
  config.model.size = "base"  # H=768, A=12, intermediate 3072 ...
  config.model.num_layers = 6  # ... and half of BERT-base's 12 layers: 66M parameters.
  config.model.vocab_size = 30522  # bert-base-uncased's vocab, as the teacher's.
  config.model.dtype = "bfloat16"  # Compute dtype on TPU; params stay float32.
  config.data.max_seq_length = 128
  config.data.max_predictions_per_seq = 20
  config.data.objective = "none"  # DistilBERT drops NSP.
  config.data.masking = "token"  # Dynamic token masking, re-drawn each time (RoBERTa style).
  config.optimizer.learning_rate = 5e-4  # Sanh et al.'s peak learning rate.
  config.optimizer.warmup_steps = 10_000
  config.distillation.teacher = arg or ""  # The teacher's workdir (required).
  config.distillation.temperature = 2.0  # Sanh et al.'s T.
  config.distillation.soft_weight = 5.0  # alpha: T^2 x soft cross-entropy.
  config.distillation.mlm_weight = 2.0  # beta: masked LM.
  config.distillation.cosine_weight = 1.0  # gamma: cosine of the last hidden states.
  config.distillation.student_init = "every_other_layer"  # Student layer i <- teacher 2i.
  return config
