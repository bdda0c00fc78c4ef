"""Segment-level recurrence shared by the families with memory (XLNet, Transformer-XL).

Each layer's input is cached as the next segment's memory of that layer (`next_memory`, the
gradient stopped); a token attends to the memory of its own document only (`attention_masks`).
Their layers share the bias-free head projections and the position-wise FFN; their LM logits go
through the word table tied to the input embedding (`layers.tied_logits`).
"""

from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import layers
from bert_jax.models.config import ModelConfig
from bert_jax.models.dropout import Dropout

_HEAD_AXES = (names.EMBED, names.HEADS, names.KV)


def attention_masks(
  input_mask_BL, perm_mask_BLL, memory_len: int, causal: bool = False, memory_ids_BN=None
):
  """(content mask, query mask), bool [B, L, memory_len + L]; True = may attend.

  Args:
    input_mask_BL: int, 0 for padding; positive values are document ids: a token sees only
      its own document (0/1 masks give XLNet's padding mask; a padding query sees every real
      token, as in transformers).
    perm_mask_BLL: 1 where token i may not see token j (XLNet's ``perm_mask``), or None.
    memory_len: number of memory positions in front of the keys.
    causal: token i may not see later tokens j > i either.
    memory_ids_BN: document ids of the memory positions; a token sees only memory of its own
      document (the memory resets at document boundaries). None: all memory is visible.
  """
  batch, length = input_mask_BL.shape
  query_BL1 = input_mask_BL[:, :, None]
  other_document_BLL = (query_BL1 > 0) & (input_mask_BL[:, None, :] != query_BL1)
  blocked_BLL = (input_mask_BL <= 0)[:, None, :] | other_document_BLL
  if perm_mask_BLL is not None:
    blocked_BLL = blocked_BLL | (perm_mask_BLL > 0)
  if causal:
    blocked_BLL = blocked_BLL | (jnp.arange(length)[None, :] > jnp.arange(length)[:, None])[None]
  if memory_ids_BN is None:
    memory_blocked_BLN = jnp.zeros((batch, length, memory_len), bool)
  else:
    memory_blocked_BLN = memory_ids_BN[:, None, :] != query_BL1
  blocked_BLK = jnp.concatenate([memory_blocked_BLN, blocked_BLL], axis=-1)
  itself_1LK = (
    jnp.arange(memory_len + length)[None, :] == memory_len + jnp.arange(length)[:, None]
  )[None]
  return ~blocked_BLK | itself_1LK, ~blocked_BLK


def next_memory(memory_BND, inputs_BLD, mem_len: int):
  """The memory for the next segment: the last ``mem_len`` of [memory; inputs] (all of it for
  ``mem_len`` 0, as transformers does), with the gradient stopped."""
  joined_BKD = inputs_BLD if memory_BND is None else jnp.concatenate([memory_BND, inputs_BLD], 1)
  keep = joined_BKD.shape[1] if mem_len <= 0 else min(mem_len, joined_BKD.shape[1])
  return jax.lax.stop_gradient(joined_BKD[:, joined_BKD.shape[1] - keep :])


def last_token_index(input_mask_BL):
  """Index of each row's last real token (XLNet summarises a sequence by its last token)."""
  length = input_mask_BL.shape[1]
  return length - 1 - jnp.argmax((input_mask_BL > 0)[:, ::-1], axis=1)


def memory_outputs(memory, layer_inputs, input_mask_BL, memory_ids_BN, mem_len: int):
  """(each layer's next memory, its document ids) after a segment.

  Args:
    memory: this segment's per-layer memory [B, N, D], or None.
    layer_inputs: each layer's input this segment [B, L, D].
    input_mask_BL: the segment's document ids (0 = padding).
    memory_ids_BN: the memory's document ids; None with a memory: the first token's document.
    mem_len: memory positions kept (0 = everything, as transformers does).
  """
  memories = [
    next_memory(None if memory is None else memory[i], x_BLD, mem_len)
    for i, x_BLD in enumerate(layer_inputs)
  ]
  if memory_ids_BN is None and memory is not None:
    # Memory of unknown documents: treat it as the first token's document.
    memory_ids_BN = jnp.broadcast_to(input_mask_BL[:, :1], memory[0].shape[:2])
  return memories, next_memory(memory_ids_BN, input_mask_BL, mem_len)


class HeadProjection(nn.Module):
  """A bias-free [embed, heads, head_dim] kernel; named ``kernel`` so it gets weight decay."""

  config: ModelConfig

  @nn.compact
  def __call__(self):
    config = self.config
    shape = (config.hidden_size, config.num_heads, config.head_dim)
    return self.param("kernel", layers.normal_init(config, _HEAD_AXES), shape, jnp.float32)


class FeedForward(nn.Module):
  """The position-wise FFN of XLNet and Transformer-XL: dense, activation, dropout, dense,
  dropout, residual, with the LayerNorm after the residual (or on the input when pre-LN).

  Attributes:
    config: the model configuration.
    deterministic: disables dropout.
    activation: XLNet's GELU, or Transformer-XL's ReLU.
    pre_layer_norm: Transformer-XL's ``model.pre_layer_norm`` (XLNet is always post-LN).
  """

  config: ModelConfig
  deterministic: bool = True
  activation: Callable = layers.gelu
  pre_layer_norm: bool = False

  @nn.compact
  def __call__(self, x_BLD):
    config = self.config
    dropout = Dropout(config.hidden_dropout_rate)
    inner = layers.dense(config, config.intermediate_size, (names.EMBED, names.MLP), "layer_1")
    outer = layers.dense(config, config.hidden_size, (names.MLP, names.EMBED), "layer_2")
    layer_norm = layers.layer_norm(config, "layer_norm")
    y_BLD = layer_norm(x_BLD) if self.pre_layer_norm else x_BLD
    y_BLF = dropout(self.activation(inner(y_BLD)), self.deterministic)
    y_BLD = dropout(outer(y_BLF), self.deterministic)
    if self.pre_layer_norm:
      return x_BLD + y_BLD
    return layer_norm(x_BLD + y_BLD)
