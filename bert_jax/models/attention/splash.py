"""Pallas TPU splash attention, sharded with `jax.shard_map`.

Splash attention (block-sparse flash attention, `jax.experimental.pallas.ops.tpu`) never
materialises the [L, L] probabilities. Padding and packed documents are expressed through the
kernel's segment ids, which take the model's ``segment_ids_BL`` unchanged (0 = padding, equal
positive ids = one document): a query attends only to keys with its own id. A padding query
therefore attends to the padding keys (its output is defined but meaningless), while a real
token never sees padding or another document, exactly as in `dense.dense_attention`; unlike the
dense path no row is ever fully masked, so the kernel's softmax never divides by zero.

The kernel works on one sequence and all heads of one device, so it is `vmap`ped over the batch
and run under `jax.shard_map` with the batch over the data-parallel mesh axes and heads over the
tensor axis (from the logical axis rules). Off TPU it runs in Pallas interpret mode (slow, for
tests and CPU debugging). The kernel has no dropout on the attention probabilities.
"""

import math

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu import splash_attention as splash_lib

from bert_jax.models import per_shard
from bert_jax.models import platform as platform_lib
from bert_jax.models.attention import blocks

# Splash tiles q and kv in blocks that are multiples of the 128-lane vector width and divide
# the sequence length; larger blocks amortise per-block overhead (MaxText uses 512).
_BLOCK_CHOICES = (512, 256, 128)


def block_size(length: int) -> int:
  """The largest supported kernel block that divides ``length``.

  Raises:
    UserInputError: when ``length`` is not a multiple of 128.
  """
  return blocks.largest_dividing(length, _BLOCK_CHOICES, "'splash'")


def _kernel(num_heads: int, length: int, interpret: bool):
  """The splash kernel for ``num_heads`` heads of one sequence, with full (unmasked) attention.

  Masking comes entirely from segment ids, so the static mask is full and no block is skipped.
  """
  block = block_size(length)
  mask = splash_lib.MultiHeadMask([splash_lib.FullMask((length, length))] * num_heads)
  # The fused backward kernel computes dq, dk and dv in one pass (MaxText's default).
  block_sizes = splash_lib.BlockSizes(
    block_q=block,
    block_kv=block,
    block_kv_compute=block,
    block_q_dkv=block,
    block_kv_dkv=block,
    block_kv_dkv_compute=block,
    use_fused_bwd_kernel=True,
  )
  return splash_lib.make_splash_mha(
    mask, block_sizes=block_sizes, head_shards=1, q_seq_shards=1, interpret=interpret
  )


def splash_attention(query_BLHD, key_BLHD, value_BLHD, segment_ids_BL, *, interpret=None):
  """Scaled dot-product attention through the splash kernel, sharded over the current mesh.

  Under a mesh (`jax.set_mesh`) the batch is split over the mesh axes that the logical axis
  rules give ``activation_batch`` and the heads over those of ``activation_heads`` (each only
  when it divides evenly); the length is never split (the kernel needs whole key sequences).
  Without a mesh the kernel runs on the whole arrays.

  Args:
    query_BLHD: queries [batch, length, heads, head_dim]; length a multiple of 128.
    key_BLHD: keys, same shape.
    value_BLHD: values, same shape.
    segment_ids_BL: int [batch, length]; 0 is padding, equal positive ids may attend.
    interpret: run the kernel in Pallas interpret mode; default: when the mesh's (or default
      backend's) platform is not TPU.

  Returns:
    Attention output [batch, length, heads, head_dim] in the dtype of ``query_BLHD``.
  """
  length, head_dim = query_BLHD.shape[1], query_BLHD.shape[3]
  if interpret is None:
    interpret = platform_lib.current_platform() != "tpu"
  block_size(length)  # Refuse unsupported lengths before tracing the kernel.
  # The kernel takes logits as q . k; BERT scales them by 1/sqrt(head_dim).
  query_BLHD = query_BLHD * jnp.asarray(1.0 / math.sqrt(head_dim), query_BLHD.dtype)
  # The kernel's layout is [heads, length, head_dim] per sequence.
  q_BHLD, k_BHLD, v_BHLD = (x.transpose(0, 2, 1, 3) for x in (query_BLHD, key_BLHD, value_BLHD))
  segment_ids_BL = segment_ids_BL.astype(jnp.int32)

  def attend(q_BHLD, k_BHLD, v_BHLD, segment_ids_BL):
    kernel = _kernel(q_BHLD.shape[1], length, interpret)
    return jax.vmap(kernel)(
      q_BHLD, k_BHLD, v_BHLD, splash_lib.SegmentIds(q=segment_ids_BL, kv=segment_ids_BL)
    )

  out_BHLD = per_shard.call_per_shard(
    attend, (q_BHLD, k_BHLD, v_BHLD, segment_ids_BL), ("BHLD", "BHLD", "BHLD", "BL"), "BHLD"
  )
  return out_BHLD.transpose(0, 2, 1, 3)
