"""The project's shared vocabulary, named once: logical axes, mesh axes, tasks, model families.

Modules refer to these constants instead of repeating string literals, so a rename is one edit
and a typo is a NameError rather than a silently unsharded tensor or an unknown task.
"""

# Logical axis names of parameters (`nn.with_logical_partitioning`).
EMBED = "embed"
VOCAB = "vocab"
HEADS = "heads"
KV = "kv"
MLP = "mlp"
NORM = "norm"
POSITIONS = "positions"
TOKEN_TYPES = "token_types"
CLASSES = "classes"
LAYERS = "layers"

# Logical axis names of activations (`nn.with_logical_constraint` at block boundaries).
ACTIVATION_BATCH = "activation_batch"
ACTIVATION_LENGTH = "activation_length"
ACTIVATION_EMBED = "activation_embed"
ACTIVATION_HEADS = "activation_heads"
ACTIVATION_MLP = "activation_mlp"

# Mesh axis names (within a slice; the across-slice parts are "dcn_" + these).
DATA = "data"
FSDP = "fsdp"
TENSOR = "tensor"
MESH_AXES = (DATA, FSDP, TENSOR)

# What `bert_jax.main` can run (`config.task`).
PRETRAINING = "pretraining"
CLASSIFICATION = "classification"
TAGGING = "tagging"
SPAN_QA = "span_qa"
MULTIPLE_CHOICE = "multiple_choice"
MULTITASK = "multitask"  # Several of the above on one shared encoder (tasks/multitask/).
# Distils a frozen teacher into a student (DistilBERT, Sanh et al. 2019).
DISTILLATION = "distillation"
FINETUNING_TASKS = (CLASSIFICATION, TAGGING, SPAN_QA, MULTIPLE_CHOICE, MULTITASK)
TASKS = (PRETRAINING,) + FINETUNING_TASKS + (DISTILLATION,)
# Tasks that train on the pretraining data pipeline (its `data` section and masked positions).
PRETRAINING_DATA_TASKS = (PRETRAINING, DISTILLATION)

# The causal LM objective (`data.objective`): Transformer-XL next-token prediction over
# consecutive segments with memory (tasks/causal_lm.py), instead of masked sentence pairs.
CLM = "clm"
# XLM's translation LM (`data.objective`, family xlm): a parallel sentence pair concatenated,
# positions restarting at the second sentence, tokens masked in both (tasks/xlm_pretraining.py).
TLM = "tlm"

# Masked-LM position strategies (`data.masking`; data/mask_positions.py implements each).
MASKING_STRATEGIES = ("token", "whole_word", "span", "ngram")

# Model families (`config.model.family`).
BERT = "bert"
ALBERT = "albert"
DISTILBERT = "distilbert"
ELECTRA = "electra"
XLNET = "xlnet"
TRANSFORMER_XL = "transformer_xl"
ROBERTA = "roberta"
XLM_ROBERTA = "xlm_roberta"  # RoBERTa's architecture with XLM-R's SentencePiece vocab.
XLM = "xlm"
FAMILIES = (BERT, ALBERT, DISTILBERT, ELECTRA, XLNET, TRANSFORMER_XL, ROBERTA, XLM_ROBERTA, XLM)
DEFAULT_FAMILY = BERT  # A config that names no model.family.
