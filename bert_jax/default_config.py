"""Every config key with its default and meaning; configs/*.py start here and override
(`base_config` for pretraining, `finetune_config(task)` for fine-tuning tasks).

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
  # What main runs: pretraining | classification | tagging | span_qa | multiple_choice.
  config.task = "pretraining"
  config.seed = 0  # Params init, dropout and data order all derive from it.
  config.num_train_steps = 1_000_000  # Optimizer updates.
  # Fine-tuning: > 0 replaces num_train_steps by ceil(epochs * train examples / batch).
  config.num_train_epochs = 0.0
  # > 0 replaces optimizer.warmup_steps by round(warmup_fraction * num_train_steps).
  config.warmup_fraction = 0.0
  config.global_batch_size = 256  # Sequences per update, over all hosts and devices.
  config.gradient_accumulation_steps = 1  # Micro-batches per update (same update, less memory).
  config.log_every_steps = 100  # Train metrics to console, metrics.jsonl and TensorBoard.
  config.eval_every_steps = 10_000  # Eval over the held-out split (and at the end).
  config.checkpoint_every_steps = 10_000  # Orbax save interval (and at the end / SIGTERM).
  config.max_checkpoints_to_keep = 3  # Older checkpoints are deleted.
  config.init_from = ""  # Fine-tuning: a workdir/checkpoint to take the encoder from.
  config.freeze_encoder = False  # Fine-tuning: train the task head only (feature-based use).
  config.peak_flops_per_device = 0.0  # For MFU; 0 = from the device kind (measured on CPU).
  # Profiler trace (process 0) of profile_num_steps updates from state.step ==
  # profile_start_step into <workdir>/profile (TensorBoard's Profile tab); 0 steps = off.
  config.profile_start_step = 10  # Skip the first steps: they compile.
  config.profile_num_steps = 0

  config.model = ml_collections.ConfigDict()
  config.model.family = "bert"  # Model family (names.FAMILIES): which encoder and heads.
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
  # dense | fused | splash (Pallas TPU kernel) | auto | lsh | local. auto = splash on TPU when
  # the sequence length % 128 == 0 and attention_dropout_rate == 0, else dense (same params).
  config.model.attention_kind = "auto"
  config.model.remat_policy = "none"  # none | full | dots | dots_no_batch.
  config.model.scan_layers = False  # One scanned layer body: faster compiles for deep models.
  # Reformer reversible residual layers (pre-LN, two activation streams averaged at the end):
  # the backward pass recomputes activations, so memory stays flat in depth. Needs
  # remat_policy "none" (it already recomputes).
  config.model.reversible = False
  config.model.ffn_chunk_len = 0  # Feed-forward over chunks of this many positions; 0 = unchunked.
  config.model.embedding_size = 0  # Embedding table width, projected to hidden; 0 = hidden_size.
  # family electra: generator size (a fraction of the discriminator's unless set) and lambda.
  config.model.electra = ml_collections.ConfigDict()
  config.model.electra.generator_fraction = 0.25  # Paper: 1/4 (small, large), 1/3 (base).
  config.model.electra.generator_hidden_size = 0  # 0 = generator_fraction * hidden_size.
  config.model.electra.generator_num_heads = 0  # 0 = generator_fraction * num_heads.
  config.model.electra.generator_intermediate_size = 0  # 0 = fraction * intermediate_size.
  config.model.electra.generator_num_layers = 0  # 0 = num_layers.
  config.model.electra.rtd_weight = 50.0  # loss = generator MLM + rtd_weight * RTD.
  # Options of the lsh and local attention kinds (ignored by dense / fused).
  config.model.lsh = ml_collections.ConfigDict()
  config.model.lsh.chunk_len = 64  # data.max_seq_length must be a multiple of it.
  config.model.lsh.n_hashes = 4  # Hash rounds (lsh); more rounds approach full attention.
  # Buckets per round: an even int (one random rotation), a tuple of even factors such as
  # (16, 32) (trax's factorised hashing: 512 buckets from 8 + 16 rotations), or 0 for
  # 2 * max_seq_length // chunk_len buckets, hashed with one rotation up to 256 buckets and as
  # two near-equal even factors above (512 -> (16, 32)), which keeps hashing linear in length.
  config.model.lsh.n_buckets = ml_collections.FieldReference(0, field_type=object)
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
  # Within a slice (ICI): devices per mesh axis; -1 = all devices of the slice left over.
  config.mesh.data = -1  # Data-parallel ways.
  config.mesh.fsdp = 1  # Fully-sharded data-parallel ways (params sharded on embed).
  config.mesh.tensor = 1  # Tensor-parallel ways (heads, mlp, vocab).
  # Across slices (DCN, multi-slice TPU runs): slices per mesh axis; -1 = all slices left over.
  # Each mesh axis spans ici x dcn devices. On CPU/GPU an explicit dcn size > 1 treats groups of
  # consecutive devices as slices (to test multi-slice meshes on one host).
  config.mesh.dcn_data = -1  # Data parallelism across slices (the usual multi-slice choice).
  config.mesh.dcn_fsdp = 1
  config.mesh.dcn_tensor = 1
  config.mesh.logical_axis_rules = DEFAULT_LOGICAL_AXIS_RULES
  return config


def finetune_config(task: str) -> ml_collections.ConfigDict:
  """The fine-tuning defaults: `base_config` with the paper's fine-tuning recipe (batch 32,
  lr 2e-5, 3 epochs, 10% warmup, length 128) and the fine-tuning ``data`` section.

  Args:
    task: classification | tagging | span_qa | multiple_choice.
  """
  config = base_config()
  config.task = task
  config.num_train_epochs = 3.0
  config.warmup_fraction = 0.1
  config.global_batch_size = 32
  config.log_every_steps = 50
  config.eval_every_steps = 1_000_000  # At the end only; lower it to follow the eval score.
  config.checkpoint_every_steps = 1000
  config.max_checkpoints_to_keep = 1
  config.optimizer.learning_rate = 2e-5

  data = ml_collections.ConfigDict()
  # Examples: local files, or a TFDS dataset prepared locally (never downloaded).
  data.train_path = ""  # GLUE TSV / CSV, SQuAD JSON, CoNLL columns or SWAG CSV.
  data.eval_path = ""  # The eval file, same format (GLUE: dev.tsv).
  # classification: unlabelled test file (GLUE: test.tsv), predicted at the end of training
  # into <workdir>/predictions/<TASK>.tsv in the GLUE leaderboard's format; empty = none.
  data.test_path = ""
  data.write_eval_predictions = False  # classification: eval predictions -> predictions/dev/.
  data.tfds_name = ""  # e.g. "glue/mrpc", "squad/v1.1", "conll2003"; set = replaces the files.
  data.tfds_data_dir = ""  # Its TFDS data folder; empty = TFDS default (TFDS_DATA_DIR).
  data.tfds_train_split = "train"  # Split to train on (slices such as "train[:10%]" allowed).
  data.tfds_eval_split = "validation"  # MNLI: validation_matched / validation_mismatched.
  # Empty = init_from's vocab.txt, else the vocab in its config.json, else the embedded one.
  data.vocab_path = ""
  data.lowercase = True  # Uncased model; False for cased vocabs.
  data.max_seq_length = 128  # Tokens per sequence, [CLS] and [SEP]s included.
  data.max_train_examples = 0  # Read at most this many train examples; 0 = all.
  data.max_eval_examples = 0  # Read at most this many eval examples; 0 = all.
  # classification: a GLUE task (cola sst2 mrpc qqp stsb mnli mnli_mismatched qnli rte wnli)
  # fixes layout, labels and metrics; empty = a custom CSV/TSV with a header, described by:
  data.glue_task = ""
  data.text_a_column = ""  # Custom file: column of the first sentence.
  data.text_b_column = ""  # Custom file: column of the second sentence; empty = single.
  data.label_column = ""  # Custom file: column of the label.
  # Custom classification file: label values in id order (empty = regression on a float
  # label); tagging: the tag set in id order (empty = the train data's tags, sorted).
  data.label_names = ()
  data.conll_label_column = -1  # tagging: CoNLL column holding the tag (-1 = last).
  data.doc_stride = 128  # span_qa / tagging: sub-words between starts of overlapping windows.
  data.max_query_length = 64  # span_qa: question tokens kept.
  data.n_best_size = 20  # span_qa: start/end candidates per window.
  data.max_answer_length = 30  # span_qa: longest answer, in tokens.
  data.version_2_with_negative = False  # span_qa: SQuAD v2.0 (unanswerable questions).
  data.null_score_diff_threshold = 0.0  # span_qa v2.0: "no answer" above this margin.
  data.num_choices = 4  # multiple_choice: endings per example (SWAG: 4).
  config.data = data
  return config
