"""Model hyper-parameters as a frozen dataclass, built once from the config's ``model`` section."""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from bert_jax import names
from bert_jax.config_fields import check_keys, from_section, option, sections_field
from bert_jax.errors import UserInputError
from bert_jax.models.attention import chunk_window
from bert_jax.models.attention import kinds as attention_kinds
from bert_jax.models.family_sections import FamilySections
from bert_jax.models.recurrence_options import RecurrenceOptions
from bert_jax.models.span_boundary_options import SpanBoundaryOptions

# (num_layers, hidden_size, num_heads); intermediate size is 4 * hidden. Google's BERT sizes.
MODEL_SIZES = {
  "tiny": (2, 128, 2),
  "mini": (4, 256, 4),
  "small": (4, 512, 8),
  "medium": (8, 512, 8),
  "base": (12, 768, 12),
  "large": (24, 1024, 16),
}

# The preset a config gets when it names no ``model.size``; ModelConfig's defaults are its sizes.
DEFAULT_SIZE = "base"
SIZE_HELP = (
  f"{' | '.join(MODEL_SIZES)}: fills num_layers, hidden_size, num_heads (explicit keys win)."
)
_DEFAULT_LAYERS, _DEFAULT_HIDDEN, _DEFAULT_HEADS = MODEL_SIZES[DEFAULT_SIZE]

# "auto" = "xla" until the Triton kernels are timed against XLA's norm on a GPU.
LAYER_NORM_KINDS = ("auto", "xla", "triton")
REMAT_POLICIES = ("none", "full", "dots", "dots_no_batch")
COMPUTE_DTYPES = ("float32", "bfloat16")
HIDDEN_ACTIVATIONS = ("gelu", "gelu_new")  # Exact (erf) GELU; its tanh form (ALBERT v2).


@dataclasses.dataclass(frozen=True)
class LshOptions:
  """Options of the ``lsh`` and ``local`` attention kinds (unused by dense kinds)."""

  chunk_len: int = option(64, help="data.max_seq_length must be a multiple of it.")
  n_hashes: int = option(4, help="Hash rounds (lsh); more rounds approach full attention.")
  # An even int (one random rotation), a tuple of even factors such as (16, 32) (trax's
  # factorised hashing: 512 buckets from 8 + 16 rotations), or 0 for 2 * max_seq_length //
  # chunk_len buckets, one rotation up to 256 buckets and two near-equal even factors above
  # (512 -> (16, 32)), which keeps hashing linear in length (rule: lsh_hashing.py).
  n_buckets: int | tuple = option(
    0,
    help="Buckets per round: even int, tuple of even factors, 0 = 2*L/chunk_len.",
    config_type=object,
  )
  n_chunks_before: int = option(1, help="Earlier chunks each chunk also attends to.")
  n_chunks_after: int = option(0, help="Later chunks each chunk also attends to.")
  causal: bool = option(False, help="Forbid attending to later positions.")
  mask_across_buckets: bool = option(False, help="lsh: forbid keys from other buckets.")
  dedup_correction: bool = option(True, help="lsh: count a key seen in several rounds once.")

  def __post_init__(self):
    chunk_window.check_window(
      self.chunk_len, self.n_chunks_before, self.n_chunks_after, prefix="model.lsh."
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


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Architecture of an encoder; defaults are BERT-base (Devlin et al. 2019)."""

  family: str = option(
    names.DEFAULT_FAMILY, help=f"Model family (models/families.py): {' | '.join(names.FAMILIES)}."
  )
  vocab_size: int = option(30522, help="Must equal the number of entries of the data's vocab.")
  num_layers: int = option(_DEFAULT_LAYERS, help="Unset = from model.size.", from_preset=True)
  hidden_size: int = option(_DEFAULT_HIDDEN, help="Unset = from model.size.", from_preset=True)
  num_heads: int = option(_DEFAULT_HEADS, help="Unset = from model.size.", from_preset=True)
  intermediate_size: int = option(
    4 * _DEFAULT_HIDDEN, help="Feed-forward width; unset = 4 x hidden.", from_preset=True
  )
  max_position_embeddings: int = option(512, help="Longest sequence the model can take.")
  type_vocab_size: int = option(2, help="Segment A / B.")
  hidden_dropout_rate: float = option(0.1, help="Dropout on embeddings and residual branches.")
  attention_dropout_rate: float = option(0.1, help="Dropout on attention probabilities.")
  layer_norm_eps: float = option(1e-12, help="LayerNorm epsilon (BERT: 1e-12).")
  initializer_range: float = option(0.02, help="Std of the truncated-normal weight init.")
  dtype: str = option(
    "float32", help=f"Compute dtype: {' | '.join(COMPUTE_DTYPES)} (params stay float32)."
  )
  attention_kind: str = option(
    "auto",
    help="dense | fused | splash (Pallas TPU) | cudnn (NVIDIA GPU, bf16, right-padded rows, "
    "no attention dropout) | flash (Pallas FlashAttention-2 with attention dropout, one "
    "mask on both platforms: Triton on NVIDIA GPU, L % 16 == 0; Mosaic on TPU, "
    "L % 128 == 0; head_dim a power of two in 16..256) | auto (on GPU flash where it applies; "
    "on TPU with L % 128 == 0: splash without attention dropout, flash with it from L=512; "
    "else dense) | lsh | local.",
  )
  layer_norm_kind: str = option(
    "auto",
    help="xla (compiled by XLA) | triton (one Triton kernel each way, NVIDIA GPU; Pallas "
    "interpret mode on CPU; not on TPU) | auto (xla).",
  )
  remat_policy: str = option("none", help=f"{' | '.join(REMAT_POLICIES)}.")
  scan_layers: bool = option(False, help="One scanned layer body: faster compiles when deep.")
  reversible: bool = option(
    False,
    help="Reformer reversible residual layers (pre-LN): the backward pass recomputes "
    "activations, memory flat in depth; needs remat_policy none.",
  )
  ffn_chunk_len: int = option(
    0, help="Feed-forward over chunks of this many positions; 0 = unchunked."
  )
  lsh: LshOptions = option(
    default_factory=LshOptions, help="Options of the lsh and local attention kinds."
  )
  hidden_act: str = option(
    "gelu", help="Feed-forward / MLM-head activation: gelu (exact) | gelu_new (tanh, ALBERT v2)."
  )
  pre_layer_norm: bool = option(
    False,
    help="transformer_xl: LayerNorm before attention and FFN (HF TransfoXL's pre_lnorm) "
    "instead of after the residual",
  )
  causal: bool = option(
    False,
    help="xlnet: tokens see only the memory, earlier tokens and themselves (Transformer-XL's "
    "LM; transformers' attn_type='uni'); transformer_xl: always True; xlm: CLM (its causal)",
  )
  embedding_size: int = option(
    0,
    help="Width E of the token/position/type tables, projected to hidden_size when it differs "
    "(ALBERT, ELECTRA: factorised embeddings); 0 = hidden_size.",
  )
  # The families' own sections (model.electra, model.adaptive, ...): `families.SECTIONS`.
  family_sections: FamilySections = sections_field(
    FamilySections, help="Sections of family-only keys, declared by the family packages."
  )
  recurrence: RecurrenceOptions = option(
    default_factory=RecurrenceOptions,
    help="Segment memory and relative positions of families xlnet and transformer_xl.",
  )
  span_boundary: SpanBoundaryOptions = option(
    default_factory=SpanBoundaryOptions,
    help="SpanBERT's span boundary objective (any masked-LM family).",
  )

  def __post_init__(self):
    if not isinstance(self.family_sections, FamilySections):
      object.__setattr__(self, "family_sections", FamilySections(self.family_sections))
    if self.family not in names.FAMILIES:
      raise UserInputError(
        f"model.family={self.family!r} is unknown; choose one of {', '.join(names.FAMILIES)}"
      )
    if self.hidden_size % self.num_heads:
      raise UserInputError(
        f"model.hidden_size={self.hidden_size} is not divisible by model.num_heads="
        f"{self.num_heads}; pick a head count that divides the hidden size"
      )
    attention = attention_kinds.get(self.attention_kind)  # Refuses an unknown kind.
    if self.layer_norm_kind not in LAYER_NORM_KINDS:
      raise UserInputError(
        f"model.layer_norm_kind={self.layer_norm_kind!r} is unknown; "
        f"choose one of {', '.join(LAYER_NORM_KINDS)}"
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
    attention.check_config(self)
    if self.ffn_chunk_len < 0:
      raise UserInputError(
        f"model.ffn_chunk_len={self.ffn_chunk_len} must be >= 0; use 0 for "
        "an unchunked feed-forward"
      )
    if self.hidden_act not in HIDDEN_ACTIVATIONS:
      raise UserInputError(
        f"model.hidden_act={self.hidden_act!r} is unknown; "
        f"choose one of {', '.join(HIDDEN_ACTIVATIONS)}"
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
    # Each section checks itself against the rest of the model, a family's section the keys
    # its family needs too, and the family sections their families' checks, so this module
    # calls no family's code by name.
    for field in dataclasses.fields(self):
      check = getattr(getattr(self, field.name), "check_model", None)
      if check is not None:
        check(self)

  def __getattr__(self, name: str):
    # Only reached for names that are not fields: a family's section (``config.electra``).
    sections = self.__dict__.get("family_sections", {})
    if name in sections:
      return sections[name]
    if name.startswith("__"):
      raise AttributeError(name)
    raise AttributeError(
      f"this model config (family {self.__dict__.get('family')!r}) has no section model.{name}; "
      "build it with bert_jax.models.families.model_config_from_dict, which adds every "
      "family's sections"
    )

  def with_sections(self, **sections) -> "ModelConfig":
    """The same config with family sections (name -> options instance) replaced or added."""
    return dataclasses.replace(self, family_sections=self.family_sections.replace(**sections))

  def to_dict(self) -> dict:
    """The config as config.json stores it: every key, sections (family ones included) as
    nested dicts, in declaration order (`model_config_from_dict` reads it back)."""
    out = {}
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      if isinstance(value, FamilySections):
        out.update({name: dataclasses.asdict(options) for name, options in value.items()})
      elif dataclasses.is_dataclass(value):
        out[field.name] = dataclasses.asdict(value)
      else:
        out[field.name] = value
    return out

  @property
  def head_dim(self) -> int:
    return self.hidden_size // self.num_heads

  @property
  def embedding_width(self) -> int:
    """E: the width of the embedding tables (``embedding_size``, or the hidden size)."""
    return self.embedding_size or self.hidden_size


# Nested sections every model config has: name -> their options dataclass (the families' own
# are `families.SECTIONS`).
SECTIONS = {
  "lsh": LshOptions,
  "recurrence": RecurrenceOptions,
  "span_boundary": SpanBoundaryOptions,
}
# Keys of the earlier flat layout -> (section, key) where they live now. config.json files of
# earlier runs are read with them (`stored_model_section`); configs and flags that set them get
# a one-line error naming the new key (`moved_key_message`).
MOVED_KEYS = {
  "mem_len": ("recurrence", "mem_len"),
  "eval_mem_len": ("recurrence", "eval_mem_len"),
  "clamp_len": ("recurrence", "clamp_len"),
  "same_length": ("recurrence", "same_length"),
  "untie_r": ("recurrence", "untie_r"),
  "layer_sharing": ("albert", "layer_sharing"),
  "span_boundary_objective": ("span_boundary", "enabled"),
  "span_boundary_max_offset": ("span_boundary", "max_offset"),
}


def model_config_from_dict(
  model_dict: Mapping[str, Any],
  family_sections: Mapping[str, type] | None = None,
  family_check: Callable | None = None,
) -> ModelConfig:
  """Builds a `ModelConfig` from the config's ``model`` section.

  The section may name a ``size`` (a key of `MODEL_SIZES`) that fills layers, width and heads;
  explicit keys win over the size preset. A config's ``model`` section is read with every
  family's sections by `bert_jax.models.families.model_config_from_dict`; a family's own
  modules (its Hugging Face reader) pass their own sections.

  Args:
    model_dict: the ``model`` section as a plain mapping.
    family_sections: name -> options dataclass of the family-only sections it may set; each
      is held (at its defaults where unset).
    family_check: ``ModelConfig -> None``, the checks of the config's family (`FamilySections`).

  Returns:
    The validated, frozen model configuration.
  """
  family_sections = dict(family_sections or {})
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
  moved = sorted(set(fields) & set(MOVED_KEYS))
  if moved:
    raise UserInputError(moved_key_message(moved[0]))
  check_keys(ModelConfig, fields, "model", sections=family_sections)
  for name, cls in {**SECTIONS, **family_sections}.items():
    if name in fields and not isinstance(fields[name], cls):
      present = {k: v for k, v in dict(fields[name]).items() if v is not None}
      fields[name] = from_section(cls, present, f"model.{name}")
  held = {name: fields.pop(name) for name in family_sections if name in fields}
  fields["family_sections"] = FamilySections(held).with_defaults(family_sections, family_check)
  return ModelConfig(**fields)


def moved_key_message(key: str) -> str:
  """The one-line error for a model key of the flat layout that now lives in a section."""
  section, name = MOVED_KEYS[key]
  return (
    f"model.{key} is now model.{section}.{name}; set that key instead (e.g. "
    f"--config.model.{section}.{name}=...); config.json files of earlier runs are read in "
    "either layout"
  )


def stored_model_section(stored_config: Mapping[str, Any]) -> dict:
  """The ``model`` section of a run's stored ``config.json``, in the current key layout.

  The one place where config.json files written before model keys moved into sections are
  read: each flat key of `MOVED_KEYS` moves into its section (a key the section also names
  wins). Resume, init_from, distillation teachers and the tools (embed, convert) all read a
  run's model through here.

  Args:
    stored_config: the parsed config.json ({} if the run has none).

  Returns:
    The model section as a plain dict ({} if there is none).
  """
  model = dict(stored_config.get("model") or {})
  for key in sorted(set(model) & set(MOVED_KEYS)):
    section, name = MOVED_KEYS[key]
    value = model.pop(key)
    model[section] = {name: value, **dict(model.get(section) or {})}
  return model
