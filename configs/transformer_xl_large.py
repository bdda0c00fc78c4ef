"""Transformer-XL large (Dai et al. 2019, WikiText-103: L=18, d_model 1024, 16 heads, d_inner
4096): the causal LM with 384-token segments and a 384-token memory.

  python -m bert_jax.main --config=configs/transformer_xl_large.py \
      --workdir=gs://my-bucket/transformer_xl_large \
      --config.data.corpus_paths='("gs://my-bucket/wikitext-103/wiki.train.tokens",)' \
      --config.data.vocab_path=gs://my-bucket/wt103_spiece.model

As configs/transformer_xl_base.py, at the paper's large size (its TPU recipe: batch 128, 16k
warmup steps, dropout and attention dropout 0.2); eval carries a 1600-token memory with
distances clamped at 1000, as the paper's WikiText-103 evaluation. Differences from the
paper: a subword vocab instead of 267k words with an adaptive softmax, linear instead of
cosine decay.
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.num_train_steps = 4_000_000  # The paper's TPU train_steps.
  config.global_batch_size = 128  # Rows = streams of consecutive segments.
  config.log_every_steps = 500
  config.eval_every_steps = 10_000
  config.checkpoint_every_steps = 10_000
  config.model.family = "transformer_xl"  # Relative attention + memory, HF TransfoXL layout.
  config.model.causal = True  # Required: the memory and earlier tokens only.
  config.model.layer_norm_eps = 1e-5  # The PyTorch original and transformers (not BERT's 1e-12).
  config.model.num_layers = 18
  config.model.hidden_size = 1024  # d_model.
  config.model.num_heads = 16  # d_head = 64.
  config.model.intermediate_size = 4096  # d_inner.
  config.model.vocab_size = 32000  # A 32k SentencePiece vocab of the corpus (pass it).
  config.model.hidden_dropout_rate = 0.2  # dropout.
  config.model.attention_dropout_rate = 0.2  # dropatt.
  config.model.recurrence.mem_len = 384  # Memory positions per layer in training.
  config.model.recurrence.eval_mem_len = 1600  # The paper evaluates with a longer memory.
  config.model.recurrence.clamp_len = 1000  # Relative distances beyond 1000 share one encoding.
  config.data.objective = "clm"  # Next-token loss over consecutive segments.
  config.data.max_seq_length = 384  # tgt_len: tokens per segment.
  config.data.lowercase = False  # WikiText-103 is cased.
  config.optimizer.learning_rate = 2.5e-4  # Adam, as the paper.
  config.optimizer.warmup_steps = 16_000
  config.optimizer.weight_decay = 0.0  # Plain Adam.
  config.optimizer.max_grad_norm = 0.25  # The paper's clip.
  return config
