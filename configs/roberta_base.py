"""RoBERTa-base pretraining with the paper's recipe (Liu et al. 2019), sequence length 512.

  python -m bert_jax.tools.train_vocab --input='/data/text/*.txt' \\
      --output=/data/roberta/vocab.json --kind=bytelevel_bpe --vocab_size=50265
  python -m bert_jax.main --config=configs/roberta_base.py --workdir=/tmp/roberta_base \\
      --config.data.corpus_paths='("/data/text/*.txt",)' \\
      --config.data.vocab_path=/data/roberta/vocab.json

or with a converted checkpoint's vocab (``convert --from=hf`` on roberta-base copies its
vocab.json and merges.txt into the workdir). BERT's encoder with positions counted past the
padding index (514 rows), one segment type and no NSP; FULL-SENTENCES rows packed across
documents (``</s>`` after each) and masked anew every time a row is read (dynamic masking).
Adam (beta2 0.98, eps 1e-6), peak lr 6e-4 after 24k warmup steps, linear decay, batch 8k for
500k steps, no gradient clipping. 124,697,433 parameters (Hugging Face's RobertaForMaskedLM).
"""

from bert_jax.default_config import base_config


def get_config(arg=None):
  del arg
  config = base_config()
  config.num_train_steps = 500_000  # The paper's longest schedule (Table 4).
  config.global_batch_size = 8192  # Sequences per update.
  config.model.family = "roberta"  # BERT blocks, RoBERTa positions, one type, no NSP head.
  config.model.size = "base"  # L=12, H=768, A=12, intermediate 3072.
  config.model.vocab_size = 50265  # GPT-2's byte-level BPE + <s> <pad> </s> <unk> <mask>.
  config.model.max_position_embeddings = 514  # 512 tokens after the padding index (1) + 1.
  config.model.type_vocab_size = 1  # One segment type.
  config.model.layer_norm_eps = 1e-5  # fairseq's LayerNorm epsilon.
  config.model.hidden_dropout_rate = 0.1  # The paper's dropout.
  config.model.attention_dropout_rate = 0.1
  config.data.vocab_path = ""  # Set to a byte-level BPE vocab.json (merges.txt beside it).
  config.data.lowercase = False  # Byte-level BPE is cased.
  config.data.max_seq_length = 512  # Full-length sequences throughout.
  config.data.max_predictions_per_seq = 80  # 15% of 512, as BERT at 512.
  config.data.objective = "none"  # No NSP.
  config.data.packing = "full_sentences"  # Rows of whole sentences across documents.
  config.optimizer.name = "adamw"  # Adam with decoupled weight decay.
  config.optimizer.learning_rate = 6e-4  # Peak, after warmup (base).
  config.optimizer.warmup_steps = 24_000  # Then linear decay to 0.
  config.optimizer.weight_decay = 0.01  # Not on LayerNorm or biases.
  config.optimizer.b1 = 0.9
  config.optimizer.b2 = 0.98  # Stabler than 0.999 at large batches (the paper's section 3.1).
  config.optimizer.eps = 1e-6
  config.optimizer.max_grad_norm = 0.0  # No gradient clipping.
  return config
