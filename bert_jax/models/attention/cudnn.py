"""cuDNN's fused (flash) attention on NVIDIA GPUs, masked by sequence lengths.

`jax.nn.dot_product_attention(implementation="cudnn")` with per-row lengths: nothing of size
[B, H, L, L] reaches HBM in either pass, and a length mask is cheaper for the kernel than the
boolean [B, 1, L, L] mask the ``fused`` kind passes (H200, BERT-base's attention, fwd+bwd of
one layer at batch 256 x 128: 0.71 ms against 0.93 ms; bert_jax's dense kernel: 1.04 ms).

What the kernel can express, and so what this kind requires:

- **No attention dropout.** cuDNN has dropout inside the kernel, but through JAX 0.11.2 its
  backward pass drew another mask than its forward (measured on an H200: <out, d_out> and
  <value, d_value>, equal for any one mask, differed by 18%), so its gradients were wrong; the
  config refuses the kind with ``attention_dropout_rate`` > 0.
- **Masks are sequence lengths.** Every row must hold one document, right-padded: segment ids
  ``d, ..., d, 0, ..., 0`` (what BERT's pairs and every fine-tuning task produce). Rows packed
  with several documents (RoBERTa's FULL-SENTENCES) cannot be expressed: the config refuses the
  kind with ``data.packing='full_sentences'``, and a packed row that reaches the kernel anyway
  (records packed offline) makes its queries NaN, so the step's non-finite check stops the run
  instead of letting documents attend to each other.
- **Padding queries** get a zero output (the dense kernel gives them a uniform average); no
  real token ever reads them, so the model's outputs at real tokens and its loss are the same.
- bf16 compute, head_dim a multiple of 8 and at most 128 (checked by the config).
"""

import jax
import jax.numpy as jnp

from bert_jax.errors import UserInputError


def single_document_rows(segment_ids_BL):
  """Per row: True when its ids are one positive id then only padding (or all padding).

  Args:
    segment_ids_BL: int [batch, length]; 0 is padding, positive ids are documents.

  Returns:
    bool [batch].
  """
  length = segment_ids_BL.shape[1]
  real_B = jnp.sum(segment_ids_BL != 0, axis=1)
  expected_BL = jnp.where(jnp.arange(length)[None, :] < real_B[:, None], segment_ids_BL[:, :1], 0)
  return jnp.all(segment_ids_BL == expected_BL, axis=1)


def cudnn_attention(query_BLHD, key_BLHD, value_BLHD, segment_ids_BL):
  """Scaled dot-product attention by cuDNN, masked by each row's length.

  Args:
    query_BLHD: queries [batch, length, heads, head_dim], bf16.
    key_BLHD: keys, same shape and dtype.
    value_BLHD: values, same shape and dtype.
    segment_ids_BL: int [batch, length]; rows must be one document, right-padded (see the
      module docstring: other rows give NaN queries).

  Returns:
    Attention output [batch, length, heads, head_dim] in the inputs' dtype; zero at padding
    queries.

  Raises:
    UserInputError: off an NVIDIA GPU.
  """
  if jax.default_backend() != "gpu":
    raise UserInputError(
      f"model.attention_kind='cudnn' needs an NVIDIA GPU, but JAX runs on "
      f"{jax.default_backend()!r}; use model.attention_kind='auto' or 'dense'"
    )
  length = segment_ids_BL.shape[1]
  real_B = jnp.sum(segment_ids_BL != 0, axis=1).astype(jnp.int32)
  # Padding positions are zeroed on the way in and out: what the kernel leaves in rows past a
  # length is not specified, and a NaN there would reach the weight gradients as NaN * 0.
  real_BL11 = (jnp.arange(length)[None, :] < real_B[:, None])[:, :, None, None]
  poison_B = jnp.where(single_document_rows(segment_ids_BL), 1.0, jnp.nan)
  query_BLHD = query_BLHD * poison_B.astype(query_BLHD.dtype)[:, None, None, None]
  zero = jnp.zeros((), query_BLHD.dtype)
  query_BLHD, key_BLHD, value_BLHD = (
    jnp.where(real_BL11, x_BLHD, zero) for x_BLHD in (query_BLHD, key_BLHD, value_BLHD)
  )
  # An all-padding row (a batch's filler) gets length 1, where length 0 is not defined by the
  # kernel; its only key is zero, so its outputs are finite (and zeroed below).
  lengths_B = jnp.maximum(real_B, 1)
  out_BLHD = jax.nn.dot_product_attention(
    query_BLHD,
    key_BLHD,
    value_BLHD,
    query_seq_lengths=lengths_B,
    key_value_seq_lengths=lengths_B,
    implementation="cudnn",
  )
  return jnp.where(real_BL11, out_BLHD, zero)
