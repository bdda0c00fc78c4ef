"""Model hyper-parameters as a frozen dataclass, built once from the config's ``model`` section."""

import dataclasses
from collections.abc import Mapping
from typing import Any

from bert_jax import names
from bert_jax.config_fields import option
from bert_jax.errors import UserInputError
from bert_jax.models.electra_config import ElectraOptions, generator_config

# (num_layers, hidden_size, num_heads); intermediate size is 4 * hidden. Google's BERT sizes.
MODEL_SIZES = {
  "tiny": (2, 128, 2),
  "mini": (4, 256, 4),
  "small": (4, 512, 8),
  "medium": (8, 512, 8),
  "base": (12, 768, 12),
  "large": (24, 1024, 16),
}

# "auto" = splash on TPU where it applies, else dense (rule: attention/splash.py auto_kind).
ATTENTION_KINDS = ("dense", "fused", "splash", "auto", "lsh", "local")
REMAT_POLICIES = ("none", "full", "dots", "dots_no_batch")
COMPUTE_DTYPES = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class LshOptions:
  """Options of the ``lsh`` and ``local`` attention kinds (unused by dense kinds)."""

  chunk_len: int = 64
  n_hashes: int = 4
  # Buckets per round: an even int (one rotation), a tuple of even factors (factorised, a * b
  # buckets), or 0: 2 * seq_len // chunk_len, factorised above 256 (rule: lsh_hashing.py).
  n_buckets: int | tuple = 0
  n_chunks_before: int = 1
  n_chunks_after: int = 0
  causal: bool = False
  mask_across_buckets: bool = False
  dedup_correction: bool = True

  def __post_init__(self):
    if self.chunk_len < 1:
      raise UserInputError(
        f"model.lsh.chunk_len={self.chunk_len} must be >= 1; typical values are 64-256"
      )
    if self.n_hashes < 1:
      raise UserInputError(
        f"model.lsh.n_hashes={self.n_hashes} must be >= 1; use 1-8 hash "
        "rounds (more approach full attention)"
      )
    if isinstance(self.n_buckets, (tuple, list)):
      object.__setattr__(self, "n_buckets", tuple(self.n_buckets))  # Hashable, JSON-stable.
      factors = self.n_buckets
    else:
      factors = (self.n_buckets,) if self.n_buckets else ()
    if any(not isinstance(f, int) or f < 2 or f % 2 for f in factors) or (
      not factors and self.n_buckets != 0
    ):
      raise UserInputError(
        f"model.lsh.n_buckets={self.n_buckets} must be even (an even count, "
        "a tuple of even factors such as (16, 32), or 0 for the default "
        "2 * seq_len // chunk_len)"
      )
    if self.n_chunks_before < 0 or self.n_chunks_after < 0:
      raise UserInputError(
        f"model.lsh.n_chunks_before={self.n_chunks_before} and n_chunks_after="
        f"{self.n_chunks_after} must be >= 0; use 0 for no neighbour on that side"
      )


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Architecture of an encoder; defaults are BERT-base (Devlin et al. 2019)."""

  # Which model family (`models/families.py`) builds the encoder and the pretraining model.
  family: str = names.BERT
  vocab_size: int = 30522
  hidden_size: int = 768
  num_layers: int = 12
  num_heads: int = 12
  intermediate_size: int = 3072
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  hidden_dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.1
  layer_norm_eps: float = 1e-12
  initializer_range: float = 0.02
  dtype: str = "float32"
  attention_kind: str = "auto"
  remat_policy: str = "none"
  scan_layers: bool = False
  # Reformer-style reversible residual layers (pre-LN; see models/reversible.py): activations
  # are recomputed in the backward pass, so activation memory does not grow with depth.
  reversible: bool = False
  # Feed-forward applied to chunks of this many positions at a time (0 = whole sequence), so
  # the [batch, length, intermediate] activation never exists for the whole length at once.
  ffn_chunk_len: int = 0
  lsh: LshOptions = LshOptions()
  embedding_size: int = option(
    0, help="Width of the embedding tables, projected to hidden_size if it differs; 0 = hidden."
  )
  electra: ElectraOptions = option(
    default_factory=ElectraOptions, help="Generator size and RTD weight of family electra."
  )

  def __post_init__(self):
    if self.family not in names.FAMILIES:
      raise UserInputError(
        f"model.family={self.family!r} is unknown; choose one of {', '.join(names.FAMILIES)}"
      )
    if self.hidden_size % self.num_heads:
      raise UserInputError(
        f"model.hidden_size={self.hidden_size} is not divisible by model.num_heads="
        f"{self.num_heads}; pick a head count that divides the hidden size"
      )
    if self.attention_kind not in ATTENTION_KINDS:
      raise UserInputError(
        f"model.attention_kind={self.attention_kind!r} is unknown; "
        f"choose one of {', '.join(ATTENTION_KINDS)}"
      )
    if self.remat_policy not in REMAT_POLICIES:
      raise UserInputError(
        f"model.remat_policy={self.remat_policy!r} is unknown; "
        f"choose one of {', '.join(REMAT_POLICIES)}"
      )
    if self.dtype not in COMPUTE_DTYPES:
      raise UserInputError(
        f"model.dtype={self.dtype!r} is unknown; choose one of {', '.join(COMPUTE_DTYPES)}"
      )
    if self.attention_kind in ("fused", "splash") and self.attention_dropout_rate > 0:
      raise UserInputError(
        f"model.attention_kind={self.attention_kind!r} has no attention-probability dropout; "
        "set model.attention_dropout_rate=0.0 or use model.attention_kind='dense' or 'auto'"
      )
    if self.ffn_chunk_len < 0:
      raise UserInputError(
        f"model.ffn_chunk_len={self.ffn_chunk_len} must be >= 0; use 0 for "
        "an unchunked feed-forward"
      )
    if self.reversible and self.remat_policy != "none":
      raise UserInputError(
        "model.reversible=True already recomputes activations in the backward pass; set "
        "model.remat_policy='none'"
      )
    if self.embedding_size < 0:
      raise UserInputError(
        f"model.embedding_size={self.embedding_size} must be >= 0 (0 = hidden_size)"
      )
    if self.family == names.ELECTRA:
      generator_config(self)  # Raises if the generator does not fit the discriminator.

  @property
  def head_dim(self) -> int:
    return self.hidden_size // self.num_heads


def model_config_from_dict(model_dict: Mapping[str, Any]) -> ModelConfig:
  """Builds a `ModelConfig` from the config's ``model`` section.

  The section may name a ``size`` (a key of `MODEL_SIZES`) that fills layers, width and heads;
  explicit keys win over the size preset.

  Args:
    model_dict: the ``model`` section as a plain mapping.

  Returns:
    The validated, frozen model configuration.
  """
  fields = {k: v for k, v in dict(model_dict).items() if v is not None}
  size = fields.pop("size", None)
  if size is not None:
    if size not in MODEL_SIZES:
      raise UserInputError(
        f"model.size={size!r} is unknown; choose one of {', '.join(MODEL_SIZES)}"
      )
    num_layers, hidden, heads = MODEL_SIZES[size]
    fields.setdefault("num_layers", num_layers)
    fields.setdefault("hidden_size", hidden)
    fields.setdefault("num_heads", heads)
    fields.setdefault("intermediate_size", 4 * hidden)
  known = {f.name for f in dataclasses.fields(ModelConfig)}
  unknown = sorted(set(fields) - known)
  if unknown:
    raise UserInputError(f"unknown model config keys {unknown}; valid keys: {sorted(known)}")
  if "lsh" in fields:
    lsh_fields = {k: v for k, v in dict(fields["lsh"]).items() if v is not None}
    known_lsh = {f.name for f in dataclasses.fields(LshOptions)}
    unknown_lsh = sorted(set(lsh_fields) - known_lsh)
    if unknown_lsh:
      raise UserInputError(
        f"unknown model.lsh config keys {unknown_lsh}; valid keys: {sorted(known_lsh)}"
      )
    fields["lsh"] = LshOptions(**lsh_fields)
  if "electra" in fields and not isinstance(fields["electra"], ElectraOptions):
    electra_fields = {k: v for k, v in dict(fields["electra"]).items() if v is not None}
    known_electra = {f.name for f in dataclasses.fields(ElectraOptions)}
    unknown_electra = sorted(set(electra_fields) - known_electra)
    if unknown_electra:
      raise UserInputError(
        f"unknown model.electra config keys {unknown_electra}; valid keys: {sorted(known_electra)}"
      )
    fields["electra"] = ElectraOptions(**electra_fields)
  return ModelConfig(**fields)
