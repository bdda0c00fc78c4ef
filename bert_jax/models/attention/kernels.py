"""The kernel of each attention kind, run from one set of inputs (`KernelInputs`).

`layer.SelfAttention` projects the input as the kind's record asks (`kinds.AttentionKind`),
then calls ``get(kind.name)(inputs)``; each function here hands its kernel what it takes.
"""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from bert_jax.models.attention import cudnn, dense, flash, local, lsh, splash


@dataclasses.dataclass(frozen=True)
class KernelInputs:
  """What every kernel is given.

  Attributes:
    heads: the projections [B, L, H, K] in the order of the record's ``projections``; empty
      when ``packed`` holds them.
    packed: for a kind that reads them packed (off CPU): the product [B, L, 3, H, K] of the
      key, value and query projections before their bias, and the bias [3, H, K]; else None.
    segment_ids_BL: int [B, L]; 0 is padding, equal positive ids may attend to each other.
    options: ``model.lsh`` (chunks, hashing) for the chunked kinds.
    dropout_rate: attention dropout, 0.0 where it is off (inference, or a kind without it).
    rngs: keys by stream: ``dropout`` where the rate is not 0, and the record's ``rngs``.
    sow_probs: where the caller collects probabilities, stores them (kinds that keep them).
  """

  heads: tuple
  packed: tuple | None
  segment_ids_BL: Any
  options: Any
  dropout_rate: float
  rngs: Mapping[str, Any]
  sow_probs: Callable | None


def _dense(inputs: KernelInputs):
  dropout_rng = inputs.rngs.get("dropout")
  dropout = dict(dropout_rate=inputs.dropout_rate, dropout_rng=dropout_rng)
  if inputs.sow_probs is None:
    # The hand-written backward pass; the same maths as `dense_attention`.
    return dense.dense_attention_vjp(*inputs.heads, inputs.segment_ids_BL, **dropout)
  out_BLHD, probs_BHQK = dense.dense_attention(
    *inputs.heads,
    inputs.segment_ids_BL,
    **dropout,
    deterministic=dropout_rng is None,
    return_probs=True,
  )
  inputs.sow_probs(probs_BHQK)
  return out_BLHD


def _flash(inputs: KernelInputs):
  dropout = dict(dropout_rate=inputs.dropout_rate, dropout_rng=inputs.rngs.get("dropout"))
  if inputs.packed is not None:
    kvq_BLNHD, bias_NHD = inputs.packed
    return flash.flash_attention_packed(
      kvq_BLNHD, inputs.segment_ids_BL, bias_NHD=bias_NHD, **dropout
    )
  return flash.flash_attention(*inputs.heads, inputs.segment_ids_BL, **dropout)


def _without_options(attend):
  """A kernel that takes only queries, keys, values and segment ids."""
  return lambda inputs: attend(*inputs.heads, inputs.segment_ids_BL)


def _local(inputs: KernelInputs):
  options = inputs.options
  return local.local_attention(
    *inputs.heads,
    inputs.segment_ids_BL,
    chunk_len=options.chunk_len,
    n_chunks_before=options.n_chunks_before,
    n_chunks_after=options.n_chunks_after,
    causal=options.causal,
  )


def _lsh(inputs: KernelInputs):
  options = inputs.options
  qk_BLHD, value_BLHD = inputs.heads
  return lsh.lsh_attention(
    qk_BLHD,
    value_BLHD,
    inputs.segment_ids_BL,
    rng=inputs.rngs["hashing"],
    n_hashes=options.n_hashes,
    chunk_len=options.chunk_len,
    n_buckets=options.n_buckets or None,
    n_chunks_before=options.n_chunks_before,
    n_chunks_after=options.n_chunks_after,
    causal=options.causal,
    mask_across_buckets=options.mask_across_buckets,
    dedup_correction=options.dedup_correction,
  )


# Every kind of `kinds.KINDS` but ``auto``, which stands for one of them.
KERNELS = {
  "dense": _dense,
  "fused": _without_options(dense.fused_attention),
  "splash": _without_options(splash.splash_attention),
  "cudnn": _without_options(cudnn.cudnn_attention),
  "flash": _flash,
  "lsh": _lsh,
  "local": _local,
}


def get(name: str) -> Callable[[KernelInputs], Any]:
  """The kernel of the attention kind ``name``: [B, L, H, K] output from `KernelInputs`."""
  return KERNELS[name]
