"""Dense softmax attention: the reference every other kernel is tested against, and the same
maths (dropout included) with a hand-written backward pass for training."""

import functools

import jax
import jax.numpy as jnp

from bert_jax.models import dropout as dropout_lib
from bert_jax.models.attention import masks


def _masked_probabilities(query_BLHD, key_BLHD, segment_ids_BL):
  """float32 softmax probabilities [B, H, Q, K]; masked keys get 0 (uniform if all are).

  The logits leave the product in the inputs' dtype (the compute dtype: a bf16 run keeps no
  float32 [B, H, L, L] array in memory) and the softmax runs in float32.
  """
  head_dim = query_BLHD.shape[-1]
  logits_BHQK = jnp.einsum("bqhd,bkhd->bhqk", query_BLHD, key_BLHD).astype(jnp.float32) / jnp.sqrt(
    jnp.float32(head_dim)
  )
  mask_B1QK = masks.segment_mask(segment_ids_BL, segment_ids_BL)
  logits_BHQK = jnp.where(mask_B1QK, logits_BHQK, masks.large_negative(jnp.float32))
  return jax.nn.softmax(logits_BHQK, axis=-1)


def dense_attention(
  query_BLHD,
  key_BLHD,
  value_BLHD,
  segment_ids_BL,
  *,
  dropout_rate=0.0,
  dropout_rng=None,
  deterministic=True,
  return_probs=False,
):
  """Scaled dot-product attention with an explicit [B, H, L, L] probability matrix.

  Logits and softmax are computed in float32 whatever the input dtype; the output has the
  dtype of ``value_BLHD``.

  Args:
    query_BLHD: queries [batch, length, heads, head_dim].
    key_BLHD: keys, same shape.
    value_BLHD: values, same shape.
    segment_ids_BL: int [batch, length]; 0 is padding, equal positive ids may attend.
    dropout_rate: dropout on the attention probabilities (BERT uses 0.1).
    dropout_rng: PRNG key for that dropout; needed when it is active.
    deterministic: disables dropout.
    return_probs: also return the float32 probabilities [batch, heads, query, key] (before
      dropout), for inspection.

  Returns:
    Attention output [batch, length, heads, head_dim] (and the probabilities).
  """
  probs_BHQK = _masked_probabilities(query_BLHD, key_BLHD, segment_ids_BL)
  kept_BHQK = probs_BHQK
  if not deterministic and dropout_rate > 0.0:
    kept_BHQK = dropout_lib.dropout(probs_BHQK, dropout_rate, dropout_rng)
  out_BLHD = jnp.einsum("bhqk,bkhd->bqhd", kept_BHQK.astype(value_BLHD.dtype), value_BLHD)
  return (out_BLHD, probs_BHQK) if return_probs else out_BLHD


def dense_attention_vjp(
  query_BLHD, key_BLHD, value_BLHD, segment_ids_BL, *, dropout_rate=0.0, dropout_rng=None
):
  """`dense_attention` (with its dropout) differentiated by a hand-written backward pass.

  Same forward maths and the same dropout mask as `dense_attention`. What the backward keeps
  of the [B, H, L, L] arrays is one copy of the probabilities in the compute dtype (bfloat16
  in a bf16 run, never float32 there). The dropout mask is drawn again from its key (a hash of
  positions, `models/dropout.py`): kept, a scanned body stacked it for every layer (0.38 GiB a
  v5p chip for BERT-large at batch 64 × 128), and unrolled steps compiled to the same bytes
  either way on TPU and took the same time on a CPU. The gradient of the logits uses the row
  sums of ``d_out * out`` (= sum over keys of ``probs * d_probs``, as FlashAttention's
  backward does, which holds with dropout too), a [B, L, H] reduction instead of another pass
  over [B, H, L, L]. Autodiff of
  `dense_attention` keeps float32 probabilities, the mask and a broadcast softmax normaliser,
  and passes over them more often: on a TPU v5p compile of BERT-base (bf16, batch 256 x 128)
  this kernel moves fewer bytes per step, and on XLA:CPU fwd+bwd of ALBERT-base's attention
  at batch 8 x 512 takes 15-20% less CPU time.

  Args:
    query_BLHD: queries [batch, length, heads, head_dim].
    key_BLHD: keys, same shape.
    value_BLHD: values, same shape.
    segment_ids_BL: int [batch, length]; 0 is padding, equal positive ids may attend.
    dropout_rate: dropout on the attention probabilities; 0 turns it off.
    dropout_rng: PRNG key for that dropout; needed when ``dropout_rate`` > 0.

  Returns:
    Attention output [batch, length, heads, head_dim] in the dtype of ``value_BLHD``.
  """
  if dropout_rate <= 0.0:
    dropout_rng = None
  return _attention(dropout_rate, query_BLHD, key_BLHD, value_BLHD, segment_ids_BL, dropout_rng)


def _kept(probs_BHQK, dropout_rate, dropout_rng):
  """The probabilities after dropout (same dtype); unchanged without a dropout key."""
  if dropout_rng is None:
    return probs_BHQK
  keep_BHQK = dropout_lib.keep_mask(probs_BHQK.shape, dropout_rate, dropout_rng)
  scale = jnp.asarray(1.0 / (1.0 - dropout_rate), probs_BHQK.dtype)
  return jnp.where(keep_BHQK, probs_BHQK * scale, jnp.zeros((), probs_BHQK.dtype))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention(dropout_rate, query_BLHD, key_BLHD, value_BLHD, segment_ids_BL, dropout_rng):
  return _attention_forward(
    dropout_rate, query_BLHD, key_BLHD, value_BLHD, segment_ids_BL, dropout_rng
  )[0]


def _attention_forward(dropout_rate, query_BLHD, key_BLHD, value_BLHD, segment_ids_BL, rng):
  # Kept in the compute dtype: what the output product reads anyway.
  probs_BHQK = _masked_probabilities(query_BLHD, key_BLHD, segment_ids_BL).astype(value_BLHD.dtype)
  kept_BHQK = _kept(probs_BHQK, dropout_rate, rng)
  out_BLHD = jnp.einsum("bhqk,bkhd->bqhd", kept_BHQK, value_BLHD)
  residuals = (query_BLHD, key_BLHD, value_BLHD, segment_ids_BL, rng, probs_BHQK, out_BLHD)
  return out_BLHD, residuals


def _attention_backward(dropout_rate, residuals, d_out_BLHD):
  query_BLHD, key_BLHD, value_BLHD, segment_ids_BL, rng, probs_BHQK, out_BLHD = residuals
  f32 = jnp.float32
  dtype = value_BLHD.dtype
  kept_BHQK = _kept(probs_BHQK, dropout_rate, rng)  # The forward's mask, drawn again.
  d_value_BLHD = jnp.einsum("bhqk,bqhd->bkhd", kept_BHQK, d_out_BLHD.astype(dtype))
  d_kept_BHQK = jnp.einsum(
    "bqhd,bkhd->bhqk", d_out_BLHD.astype(dtype), value_BLHD, preferred_element_type=f32
  )
  d_probs_BHQK = d_kept_BHQK
  if rng is not None:
    keep_BHQK = dropout_lib.keep_mask(probs_BHQK.shape, dropout_rate, rng)
    d_probs_BHQK = jnp.where(keep_BHQK, d_kept_BHQK * f32(1.0 / (1.0 - dropout_rate)), 0.0)
  # sum_k probs * d_probs = d_out . out: out is the kept probabilities times the values.
  row_BHQ1 = jnp.einsum("bqhd,bqhd->bhq", d_out_BLHD.astype(f32), out_BLHD.astype(f32))[..., None]
  mask_B1QK = masks.segment_mask(segment_ids_BL, segment_ids_BL)
  # Masked logits get no gradient (the forward's `where`); only fully masked rows need it.
  scale = f32(1.0) / jnp.sqrt(f32(query_BLHD.shape[-1]))
  d_logits_BHQK = jnp.where(
    mask_B1QK, probs_BHQK.astype(f32) * (d_probs_BHQK - row_BHQ1) * scale, 0.0
  ).astype(dtype)
  d_query_BLHD = jnp.einsum(
    "bhqk,bkhd->bqhd", d_logits_BHQK, key_BLHD.astype(dtype), preferred_element_type=f32
  )
  d_key_BLHD = jnp.einsum(
    "bhqk,bqhd->bkhd", d_logits_BHQK, query_BLHD.astype(dtype), preferred_element_type=f32
  )
  return (
    d_query_BLHD.astype(query_BLHD.dtype),
    d_key_BLHD.astype(key_BLHD.dtype),
    d_value_BLHD.astype(value_BLHD.dtype),
    None,
    None,
  )


_attention.defvjp(_attention_forward, _attention_backward)


def fused_attention(query_BLHD, key_BLHD, value_BLHD, segment_ids_BL):
  """Attention through `jax.nn.dot_product_attention` (cuDNN / XLA fused kernels).

  No dropout on the probabilities: the fused kernels do not offer it, which is why the model
  config refuses ``attention_kind='fused'`` with a non-zero attention dropout.
  """
  mask_B1QK = masks.segment_mask(segment_ids_BL, segment_ids_BL)
  return jax.nn.dot_product_attention(query_BLHD, key_BLHD, value_BLHD, mask=mask_B1QK)
