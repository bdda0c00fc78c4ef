"""XLNet (Yang et al. 2019): a Transformer-XL backbone with two-stream attention and memory.

`XLNetEncoder` is the family's trunk (`families.py`): word embeddings (no absolute positions),
layers of relative attention, and a last-token summary as the pooled output.
`XLNetEncoder.streams` exposes everything XLNet adds: per-layer memory (``mems``), a
permutation mask and the query stream g placed by a target mapping. `XLNetLMHeadModel` puts the
tied vocabulary projection on top, as ``transformers.XLNetLMHeadModel`` does.

Masks follow XLNet: ``perm_mask[b, i, j] = 1`` forbids token i to see token j. The content
stream always sees itself; the query stream only sees what the mask allows, so it never sees
its own token's content. Memory positions are always visible.
"""

import flax.linen as nn
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import heads, layers, recurrence
from bert_jax.models.attention import relative
from bert_jax.models.config import ModelConfig
from bert_jax.models.dropout import Dropout
from bert_jax.models.recurrence import attention_masks, last_token_index
from bert_jax.models.xlnet import permutation
from bert_jax.models.xlnet.layers import XLNetLayer


def segment_differs(token_type_ids_BL, memory_len: int):
  """bool [B, L, memory_len + L]: True where query and key are in different segments.

  Memory positions count as segment 0, as in XLNet.
  """
  batch = token_type_ids_BL.shape[0]
  key_types_BK = jnp.concatenate(
    [jnp.zeros((batch, memory_len), token_type_ids_BL.dtype), token_type_ids_BL], axis=1
  )
  return token_type_ids_BL[:, :, None] != key_types_BK[:, None, :]


class XLNetEncoder(nn.Module):
  """XLNet's trunk; ``__call__`` is the family interface, `streams` the full model.

  Attributes:
    config: the model configuration (``recurrence``, ``causal`` are read here).
    deterministic: disables dropout.
  """

  config: ModelConfig
  deterministic: bool = True

  def setup(self):
    config = self.config
    self.word_embedding = layers.embedding_table(
      config, config.vocab_size, config.hidden_size, (names.VOCAB, names.EMBED)
    )
    self.mask_emb = self.param(
      "mask_emb",
      layers.normal_init(config, (None, None, names.EMBED)),
      (1, 1, config.hidden_size),
      jnp.float32,
    )
    self.layers = [
      XLNetLayer(config, self.deterministic, name=f"layer_{i}") for i in range(config.num_layers)
    ]
    self.dropout = Dropout(config.hidden_dropout_rate)
    self.pooler = layers.dense(config, config.hidden_size, (names.EMBED, names.MLP), "pooler")

  def streams(
    self,
    input_ids_BL,
    token_type_ids_BL,
    input_mask_BL,
    memory=None,
    perm_mask_BLL=None,
    target_mapping_BML=None,
    two_stream: bool = False,
    memory_ids_BN=None,
  ):
    """Runs the backbone.

    Args:
      input_ids_BL: int token ids.
      token_type_ids_BL: int segment ids (only equality matters: relative segments).
      input_mask_BL: int, 0 for padding.
      memory: per-layer memory, a sequence of ``num_layers`` arrays [B, N, D], or None.
      perm_mask_BLL: XLNet's permutation mask (1 = may not attend), or None.
      target_mapping_BML: one-hot [B, M, L]: prediction m is at position l, or None.
      two_stream: run the query stream (implied by a target mapping); without a target
        mapping it has one row per position.
      memory_ids_BN: the memory's document ids (see `attention_masks`), or None.

    Returns:
      dict: ``content`` [B, L, D] and ``query`` ([B, M, D] or None) after the final dropout;
      ``layer_inputs``: each layer's input h (what `next_memory` caches).
    """
    dtype = jnp.dtype(self.config.dtype)
    batch, length = input_ids_BL.shape
    memory_len = 0 if memory is None else memory[0].shape[1]
    masks = attention_masks(
      input_mask_BL, perm_mask_BLL, memory_len, self.config.causal, memory_ids_BN
    )
    differs_BLK = segment_differs(token_type_ids_BL, memory_len)
    distances_P = relative.relative_distances(
      length, memory_len + length, self.config.recurrence.clamp_len
    )
    positions_PD = relative.sinusoid_encodings(distances_P, self.config.hidden_size)
    positions_PD = self.dropout(positions_PD.astype(dtype), self.deterministic)
    h_BLD = self.dropout(self.word_embedding(input_ids_BL), self.deterministic)
    g_BMD = None
    if two_stream or target_mapping_BML is not None:
      rows = length if target_mapping_BML is None else target_mapping_BML.shape[1]
      g_BMD = jnp.broadcast_to(self.mask_emb.astype(dtype), (batch, rows, self.config.hidden_size))
      g_BMD = self.dropout(g_BMD, self.deterministic)
    layer_inputs = []
    for i, layer in enumerate(self.layers):
      layer_inputs.append(h_BLD)
      h_BLD, g_BMD = layer(
        h_BLD,
        g_BMD,
        None if memory is None else memory[i].astype(dtype),
        positions_PD,
        masks,
        differs_BLK,
        target_mapping_BML,
      )
    return {
      "content": self.dropout(h_BLD, self.deterministic),
      "query": None if g_BMD is None else self.dropout(g_BMD, self.deterministic),
      "layer_inputs": layer_inputs,
    }

  def summary(self, x_BLD, input_mask_BL):
    """XLNet's sequence summary: tanh(dense(last real token)) (``summary_type='last'``)."""
    index_B = last_token_index(input_mask_BL)
    last_BD = jnp.take_along_axis(x_BLD, index_B[:, None, None], axis=1)[:, 0]
    return jnp.tanh(self.pooler(last_BD))

  def __call__(self, input_ids_BL, token_type_ids_BL, input_mask_BL):
    """The family interface: (sequence [B, L, D], pooled [B, D]) without memory."""
    x_BLD = self.streams(input_ids_BL, token_type_ids_BL, input_mask_BL)["content"]
    return x_BLD, self.summary(x_BLD, input_mask_BL)

  def attend(self, x_BPD):
    """Logits over the vocabulary through the tied word table (float32)."""
    return layers.tied_logits(self.word_embedding.embedding, x_BPD)


class XLNetLMHeadModel(nn.Module):
  """XLNet with the tied LM projection (+ ``lm_loss_bias``) on the content or query stream."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(
    self,
    input_ids_BL,
    token_type_ids_BL,
    input_mask_BL,
    memory=None,
    perm_mask_BLL=None,
    target_mapping_BML=None,
    memory_ids_BN=None,
  ):
    """Returns ``logits`` (float32, of the query stream when there is a target mapping), the
    ``content`` stream, ``memory``: each layer's next memory (``model.recurrence.mem_len`` long, or
    everything when ``mem_len`` is 0, as transformers does), and ``memory_ids``: its document
    ids (``input_mask_BL``'s values)."""
    encoder = XLNetEncoder(self.config, self.deterministic, name="bert")
    out = encoder.streams(
      input_ids_BL,
      token_type_ids_BL,
      input_mask_BL,
      memory,
      perm_mask_BLL,
      target_mapping_BML,
      memory_ids_BN=memory_ids_BN,
    )
    stream = out["content"] if out["query"] is None else out["query"]
    bias_V = heads.output_bias(self, self.config, "lm_loss_bias")
    memories, memory_ids = recurrence.memory_outputs(
      memory, out["layer_inputs"], input_mask_BL, memory_ids_BN, self.config.recurrence.mem_len
    )
    return {
      "logits": encoder.attend(stream) + bias_V,
      "content": out["content"],
      "memory": memories,
      "memory_ids": memory_ids,
    }


class XLNetForPreTraining(nn.Module):
  """XLNet's permutation LM: predicts the chosen positions through the query stream.

  A fresh factorisation order is drawn on every call from the ``hashing`` rng stream (the
  step's non-dropout randomness), see `permutation.py`.
  """

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(
    self,
    input_ids_BL,
    token_type_ids_BL,
    input_mask_BL,
    masked_lm_positions_BP,
    masked_lm_weights_BP,
  ):
    """Returns float32 ``mlm_logits`` [B, P, V] for the tokens at ``masked_lm_positions_BP``.

    Args:
      input_ids_BL: the original (unmasked) token ids: the permutation, not a [MASK] token,
        hides each target from its own prediction.
      token_type_ids_BL: int segment ids.
      input_mask_BL: int, 0 for padding.
      masked_lm_positions_BP: the positions to predict.
      masked_lm_weights_BP: positive for real predictions, 0 for padding rows.
    """
    length = input_ids_BL.shape[1]
    target_BL = permutation.targets_from_positions(
      masked_lm_positions_BP, masked_lm_weights_BP, length
    )
    ranks_BL = permutation.factorisation_ranks(target_BL, self.make_rng("hashing"))
    encoder = XLNetEncoder(self.config, self.deterministic, name="bert")
    out = encoder.streams(
      input_ids_BL,
      token_type_ids_BL,
      input_mask_BL,
      perm_mask_BLL=permutation.permutation_mask(ranks_BL, target_BL),
      target_mapping_BML=permutation.target_mapping(masked_lm_positions_BP, length),
    )
    bias_V = heads.output_bias(self, self.config, "lm_loss_bias")
    return {"mlm_logits": encoder.attend(out["query"]) + bias_V}
