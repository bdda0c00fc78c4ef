"""Transformer-XL-tiny (L=2, H=128): the causal LM with segment memory on the embedded corpus, CPU.

  python -m bert_jax.main --config=configs/transformer_xl_tiny.py --workdir=/tmp/transformer_xl_tiny

Each of the 16 batch rows reads its own stream of the corpus, 32 tokens per step, and attends
to the previous 32 tokens' hidden states (the memory, carried in the train state and the
checkpoint, reset at document boundaries). Eval reads the held-out documents the same way with
a 64-token memory. The model is family transformer_xl (HF TransfoXL's layout; family xlnet with
model.causal=True trains the same way). Running the same command again resumes, memory included.
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.num_train_steps = 2000
  config.global_batch_size = 16  # Rows = streams of consecutive segments.
  config.log_every_steps = 50
  config.eval_every_steps = 500
  config.checkpoint_every_steps = 250
  config.model.family = "transformer_xl"  # Relative attention + memory, HF TransfoXL layout.
  config.model.causal = True  # Required: the memory and earlier tokens only.
  config.model.layer_norm_eps = 1e-5  # The PyTorch original and transformers (not BERT's 1e-12).
  config.model.size = "tiny"  # L=2, H=128, A=2, intermediate 512.
  config.model.vocab_size = 8192  # The embedded corpus's vocab.txt.
  config.model.recurrence.mem_len = 32  # Memory positions per layer in training.
  config.model.recurrence.eval_mem_len = 64  # Eval may look further back than training did.
  config.data.objective = "clm"  # Next-token loss over consecutive segments.
  config.data.max_seq_length = 32  # tgt_len: tokens per segment.
  config.optimizer.learning_rate = 1e-3  # Small models take a larger step.
  config.optimizer.warmup_steps = 200
  return config
