"""Every config key with its default and meaning; configs/*.py start here and override.

Top-level keys (contract): seed, num_train_steps, global_batch_size, log_every_steps,
eval_every_steps, checkpoint_every_steps, init_from. Sections: model, data, optimizer, mesh.
"""

import ml_collections

# Logical axis -> mesh axes. Params: FSDP shards the embed dimension, tensor parallelism the
# heads / mlp / vocab dimensions (Megatron style). Activations: batch over data+fsdp.
DEFAULT_LOGICAL_AXIS_RULES = (
    ("activation_batch", ("data", "fsdp")),
    ("activation_length", None),
    ("activation_embed", None),
    ("activation_heads", "tensor"),
    ("activation_mlp", "tensor"),
    ("embed", "fsdp"),
    ("vocab", "tensor"),
    ("heads", "tensor"),
    ("mlp", "tensor"),
    ("kv", None),
    ("norm", None),
    ("positions", None),
    ("token_types", None),
    ("classes", None),
    ("layers", None),
)


def base_config() -> ml_collections.ConfigDict:
  """The defaults: BERT-base pretraining as in the paper, on the embedded corpus."""
  config = ml_collections.ConfigDict()
  config.task = "pretraining"  # What main runs: "pretraining".
  config.seed = 0  # Params init, dropout and data order all derive from it.
  config.num_train_steps = 1_000_000  # Optimizer updates.
  config.global_batch_size = 256  # Sequences per update, over all hosts and devices.
  config.gradient_accumulation_steps = 1  # Micro-batches per update (same update, less memory).
  config.log_every_steps = 100  # Train metrics to console, metrics.jsonl and TensorBoard.
  config.eval_every_steps = 10_000  # Eval over the held-out split (and at the end).
  config.checkpoint_every_steps = 10_000  # Orbax save interval (and at the end / SIGTERM).
  config.max_checkpoints_to_keep = 3  # Older checkpoints are deleted.
  config.init_from = ""  # Fine-tuning: a workdir/checkpoint to take the encoder from.
  config.peak_flops_per_device = 0.0  # For MFU; 0 = from the device kind (measured on CPU).

  config.model = ml_collections.ConfigDict()
  config.model.size = "base"  # tiny | mini | small | medium | base | large (layers/width/heads).
  # Unset = from `size`; set any of them to override the preset.
  config.model.num_layers = ml_collections.config_dict.placeholder(int)
  config.model.hidden_size = ml_collections.config_dict.placeholder(int)
  config.model.num_heads = ml_collections.config_dict.placeholder(int)
  config.model.intermediate_size = ml_collections.config_dict.placeholder(int)  # FFN width.
  config.model.vocab_size = 30522  # Must equal the number of lines of data.vocab_path.
  config.model.max_position_embeddings = 512  # Longest sequence the model can take.
  config.model.type_vocab_size = 2  # Segment A / B.
  config.model.hidden_dropout_rate = 0.1
  config.model.attention_dropout_rate = 0.1
  config.model.dtype = "float32"  # Compute dtype: float32 | bfloat16 (params stay float32).
  config.model.attention_kind = "dense"  # dense | fused | lsh | local.
  config.model.remat_policy = "none"  # none | full | dots | dots_no_batch.
  config.model.scan_layers = False  # One scanned layer body: faster compiles for deep models.
  # Reformer reversible residual layers (pre-LN, two activation streams averaged at the end):
  # the backward pass recomputes activations, so memory stays flat in depth. Needs
  # remat_policy "none" (it already recomputes).
  config.model.reversible = False
  config.model.ffn_chunk_len = 0  # Feed-forward over chunks of this many positions; 0 = unchunked.
  # Options of the lsh and local attention kinds (ignored by dense / fused).
  config.model.lsh = ml_collections.ConfigDict()
  config.model.lsh.chunk_len = 64  # data.max_seq_length must be a multiple of it.
  config.model.lsh.n_hashes = 4  # Hash rounds (lsh); more rounds approach full attention.
  config.model.lsh.n_buckets = 0  # Buckets per round (even); 0 = 2 * max_seq_length // chunk_len.
  config.model.lsh.n_chunks_before = 1  # Earlier chunks each chunk also attends to.
  config.model.lsh.n_chunks_after = 0  # Later chunks each chunk also attends to.
  config.model.lsh.causal = False  # Forbid attending to later positions.
  config.model.lsh.mask_across_buckets = False  # lsh: forbid keys from other buckets.
  config.model.lsh.dedup_correction = True  # lsh: count a key seen in several rounds once.

  config.data = ml_collections.ConfigDict()
  config.data.corpus_paths = ()  # Text files (sentence per line, blank line between docs);
  #                                empty = the embedded English Wikipedia sample.
  config.data.vocab_path = ""  # WordPiece vocab.txt or SentencePiece .model; empty = embedded.
  config.data.lowercase = True  # Uncased model.
  config.data.max_seq_length = 128  # Tokens per sequence, [CLS] and [SEP]s included.
  config.data.max_predictions_per_seq = 20  # Masked positions per sequence (80 at seq 512).
  config.data.mask_prob = 0.15  # Fraction of tokens chosen for MLM.
  config.data.short_seq_prob = 0.1  # Fraction of sequences made shorter than the maximum.
  config.data.eval_fraction = 0.05  # Documents held out for the eval split.
  config.data.num_eval_examples = ml_collections.config_dict.placeholder(int) 
  # ^ Eval examples (unset: every held-out pair), rounded down to whole global batches.
  config.data.masking = "token"  # token (BERT) | whole_word (all pieces of a word) | span.
  config.data.span_geometric_p = 0.2  # span: span length in words ~ Geometric(p) (SpanBERT)
  config.data.max_span_length = 10  # ... truncated to [1, max_span_length] words (mean 3.8).
  # Sentence-level objective: nsp (BERT) | sop (ALBERT sentence order) | none (MLM only). The
  # trainer's 2-way NSP head serves nsp and sop and is dropped for none.
  config.data.objective = "nsp"
  # Pre-tokenised TFRecords from `python -m bert_jax.tools.create_pretraining_data` (globs,
  # comma-separated); set = they replace corpus_paths. vocab_path must be their vocab.
  config.data.tfrecord_pattern = ""  # e.g. "/data/wiki_128/train-*.tfrecord".
  config.data.eval_tfrecord_pattern = ""  # Its eval-*.tfrecord; empty = no eval split.
  config.data.shuffle_buffer_size = 10_000  # TFRecords: records per process's shuffle buffer.
  # A TFDS text dataset already prepared locally (`tfds build NAME --data_dir=DIR` once, with
  # network; never downloaded here); set = it replaces corpus_paths, one example = one document.
  config.data.tfds_name = ""  # e.g. "wikipedia/20230601.en"; empty = unused.
  config.data.tfds_split = "train"  # Split to read; slices such as "train[:10%]" allowed.
  config.data.tfds_text_key = "text"  # String feature holding each document's text.
  config.data.tfds_data_dir = ""  # Its TFDS data folder; empty = TFDS default (TFDS_DATA_DIR).
  config.data.tfds_max_documents = 0  # Read at most this many examples; 0 = all.
  config.data.single_sentence_next = True  # True keeps NSP labels near 50/50 (see pipeline).

  config.optimizer = ml_collections.ConfigDict()
  config.optimizer.name = "adamw"  # adamw | lamb.
  config.optimizer.learning_rate = 1e-4  # Peak, after warmup.
  config.optimizer.warmup_steps = 10_000  # Linear warmup, then linear decay to 0.
  config.optimizer.weight_decay = 0.01  # Not applied to LayerNorm or biases.
  config.optimizer.b1 = 0.9
  config.optimizer.b2 = 0.999
  config.optimizer.eps = 1e-6
  config.optimizer.max_grad_norm = 1.0  # Global-norm clipping; 0 disables.

  config.mesh = ml_collections.ConfigDict()
  config.mesh.data = -1  # Data-parallel ways; -1 = all devices left over.
  config.mesh.fsdp = 1  # Fully-sharded data-parallel ways (params sharded on embed).
  config.mesh.tensor = 1  # Tensor-parallel ways (heads, mlp, vocab).
  config.mesh.logical_axis_rules = DEFAULT_LOGICAL_AXIS_RULES
  return config
