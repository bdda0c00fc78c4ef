"""The attention kinds: one record per value of ``model.attention_kind``, and their lookup.

A record holds what the rest of the package may ask about a kind (does it drop attention
probabilities, which head sizes and dtypes it takes, is it approximate or chunked, which
random streams it draws, what ``auto`` may pick where) and checks a model config against it.
Code outside ``models/attention`` asks the record (``kinds.get(name).approximate``) instead of
comparing kind names. The kernel that runs a kind is in `kernels` (adding a kind: its record
here, its kernel there).

This module imports no JAX, so the model config can check its kind while it is built.
"""

import dataclasses
from collections.abc import Callable

from bert_jax.errors import UserInputError
from bert_jax.models.attention import auto, blocks

_EVERYWHERE = ("cpu", "gpu", "tpu")


@dataclasses.dataclass(frozen=True)
class AttentionKind:
  """What one attention kind is and takes.

  Attributes:
    name: the value of ``model.attention_kind``.
    dropout: its kernel drops attention probabilities at ``model.attention_dropout_rate``.
    refuses_dropout: the config refuses a non-zero ``attention_dropout_rate``: the kernel has
      no dropout (lsh and local have none either, and leave the rate unused).
    platforms: where its kernel runs compiled; elsewhere the Pallas kinds (flash, splash) run
      in interpret mode (slow; tests and CPU debugging) and cudnn refuses to run.
    dtypes: the compute dtypes (``model.dtype``) it takes; () = any. ``dtypes_text`` names
      them in the config's error.
    head_dims: the head sizes it takes; () = any. ``head_dims_text`` names them in the error.
    approximate: approximates full attention and forms no [L, L] probability matrix, so its
      model has no Hugging Face counterpart and no attention weights to show.
    chunked: attends within chunks of ``model.lsh.chunk_len`` (and the neighbouring chunks of
      ``model.lsh``), so sequence lengths must be multiples of it.
    projections: the input projections it reads, in order (the Reformer's lsh shares one for
      queries and keys, so it has no ``key`` parameters).
    rngs: the random streams its kernel draws, besides ``dropout``.
    keeps_probs: can hand its probabilities back (sown as ``intermediates``).
    packed: off CPU reads the three projections from one packed product [B, L, 3, H, K].
    masks_by_length: masks each row by its length, so a row must hold a single document
      (rows that pack several come out NaN).
    picks: ``auto``: the kinds it may stand for, and ``choose``, which picks one from the
      platform, length, attention dropout rate and head size (`auto.auto_kind`).
  """

  name: str
  dropout: bool = False
  refuses_dropout: bool = False
  platforms: tuple[str, ...] = _EVERYWHERE
  dtypes: tuple[str, ...] = ()
  dtypes_text: str = ""
  head_dims: tuple[int, ...] = ()
  head_dims_text: str = ""
  approximate: bool = False
  chunked: bool = False
  projections: tuple[str, ...] = ("query", "key", "value")
  rngs: tuple[str, ...] = ()
  keeps_probs: bool = False
  packed: bool = False
  masks_by_length: bool = False
  picks: tuple[str, ...] = ()
  choose: Callable[[str, int, float, int], str] | None = None

  def check_config(self, config):
    """Refuses a `ModelConfig` whose attention settings this kind cannot run.

    Raises:
      UserInputError: naming the setting and what to change.
    """
    if self.refuses_dropout and config.attention_dropout_rate > 0:
      raise UserInputError(
        f"model.attention_kind={self.name!r} has no attention-probability dropout; "
        "set model.attention_dropout_rate=0.0 or use model.attention_kind='dense' or 'auto'"
      )
    if self.dtypes and config.dtype not in self.dtypes:
      raise UserInputError(
        f"model.attention_kind={self.name!r} runs in {self.dtypes_text}, but model.dtype="
        f"{config.dtype!r}; set model.dtype={self.dtypes[0]} or model.attention_kind='dense'"
      )
    if self.head_dims and config.head_dim not in self.head_dims:
      raise UserInputError(
        f"model.attention_kind={self.name!r} takes {self.head_dims_text}, got head_dim="
        f"{config.head_dim}; change model.num_heads or use model.attention_kind='dense'"
      )

  def resolve(self, platform: str, length: int, dropout_rate: float, head_dim: int, *, keep_probs):
    """The kind that runs: this one, or the one ``auto`` picks.

    Args:
      platform: "tpu", "gpu" or "cpu".
      length: the sequence length.
      dropout_rate: ``model.attention_dropout_rate``.
      head_dim: the per-head width.
      keep_probs: the caller collects the probabilities, which only a kind that keeps them
        has, so ``auto`` picks that one.

    Returns:
      An `AttentionKind` without picks.
    """
    if not self.picks:
      return self
    if keep_probs:
      return next(kind for kind in map(get, self.picks) if kind.keeps_probs)
    return get(self.choose(platform, length, dropout_rate, head_dim))


# In the order the config's help and errors list them.
KINDS = (
  AttentionKind("dense", dropout=True, keeps_probs=True),
  # `jax.nn.dot_product_attention`: the fused kernels have no dropout.
  AttentionKind("fused", refuses_dropout=True),
  AttentionKind("splash", refuses_dropout=True, platforms=("tpu",)),
  AttentionKind(
    "cudnn",
    refuses_dropout=True,
    platforms=("gpu",),
    dtypes=("bfloat16",),
    dtypes_text="bf16",
    head_dims=tuple(range(8, 129, 8)),
    head_dims_text="heads of at most 128 and a multiple of 8",
    masks_by_length=True,
  ),
  AttentionKind(
    "flash",
    dropout=True,
    platforms=("gpu", "tpu"),
    head_dims=blocks.FLASH_HEAD_DIMS,
    head_dims_text=f"head_dim {', '.join(map(str, blocks.FLASH_HEAD_DIMS))}",
    packed=True,
  ),
  AttentionKind("auto", picks=("splash", "flash", "dense"), choose=auto.auto_kind),
  AttentionKind(
    "lsh", approximate=True, chunked=True, projections=("query", "value"), rngs=("hashing",)
  ),
  AttentionKind("local", approximate=True, chunked=True),
)
NAMES = tuple(kind.name for kind in KINDS)
_BY_NAME = {kind.name: kind for kind in KINDS}


def get(name: str) -> AttentionKind:
  """The record of the attention kind ``name``.

  Raises:
    UserInputError: for a name that is no kind, listing the kinds.
  """
  if name not in _BY_NAME:
    raise UserInputError(
      f"model.attention_kind={name!r} is unknown; choose one of {', '.join(NAMES)}"
    )
  return _BY_NAME[name]
