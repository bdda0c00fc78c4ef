"""Transformer-XL base (Dai et al. 2019, WikiText-103: L=16, d_model 410, 10 heads of 41, d_inner
2100): the causal LM with 150-token segments and a 150-token memory.

  python -m bert_jax.main --config=configs/transformer_xl_base.py --workdir=/tmp/transformer_xl_base \
      --config.data.corpus_paths='("/data/wikitext-103/wiki.train.tokens",)' \
      --config.data.vocab_path=/data/wt103_spiece.model

Family transformer_xl (HF TransfoXL's layout: relative attention with the u / v biases, memory
per layer, no absolute positions; family xlnet with model.causal=True trains the same way). Each batch row reads its own stream of
the corpus, 150 tokens per step; the memory lives in the train state and the checkpoint, and
eval carries its own, 640 positions long with distances clamped at 400, as the paper's
WikiText-103 evaluation. Differences from the paper: a subword vocab (pass one; the paper uses
WikiText-103's 267k words with an adaptive softmax), linear instead of cosine decay, batch 64
instead of 60 (divides the data-parallel devices of a pod slice).
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.num_train_steps = 200_000  # The paper's max_step.
  config.global_batch_size = 64  # Rows = streams of consecutive segments (paper: 60).
  config.log_every_steps = 200
  config.eval_every_steps = 4000
  config.checkpoint_every_steps = 4000
  config.model.family = "transformer_xl"  # Relative attention + memory, HF TransfoXL layout.
  config.model.causal = True  # Required: the memory and earlier tokens only.
  config.model.layer_norm_eps = 1e-5  # The PyTorch original and transformers (not BERT's 1e-12).
  config.model.num_layers = 16
  config.model.hidden_size = 410  # d_model.
  config.model.num_heads = 10  # d_head = 410 / 10 = 41.
  config.model.intermediate_size = 2100  # d_inner.
  config.model.vocab_size = 32000  # A 32k SentencePiece vocab of the corpus (pass it).
  config.model.hidden_dropout_rate = 0.1  # dropout.
  config.model.attention_dropout_rate = 0.0  # dropatt.
  config.model.recurrence.mem_len = 150  # Memory positions per layer in training.
  config.model.recurrence.eval_mem_len = 640  # The paper evaluates with a longer memory.
  config.model.recurrence.clamp_len = 400  # Relative distances beyond 400 share one encoding.
  config.data.objective = "clm"  # Next-token loss over consecutive segments.
  config.data.max_seq_length = 150  # tgt_len: tokens per segment.
  config.data.lowercase = False  # WikiText-103 is cased.
  config.optimizer.learning_rate = 2.5e-4  # Adam, as the paper.
  config.optimizer.warmup_steps = 0
  config.optimizer.weight_decay = 0.0  # Plain Adam.
  config.optimizer.max_grad_norm = 0.25  # The paper's clip.
  return config
