"""Transformer-XL (Dai et al. 2019): a causal LM with segment-level memory, as
``transformers.TransfoXLModel`` / ``TransfoXLLMHeadModel`` compute it, with one softmax or with
adaptive input and softmax (``model.adaptive``: `adaptive_config.py`, `adaptive_softmax.py`).

`TransformerXLEncoder` is the family's trunk (`families.py`); `TransformerXLEncoder.streams`
takes and returns per-layer memory exactly as `xlnet.XLNetEncoder.streams` does (the memory of
layer i is layer i's input over earlier segments, reset at document boundaries by
``memory_ids_BN``), so the trainer treats both families alike. `TransformerXLLMHeadModel` is
the pretraining model: the LM projection is the word table again (transformers ties
``crit.out_layers.0.weight`` to it) with its own bias, behind an untied ``output_projection``
when the table is narrower than the model (``embedding_size`` = transformers' ``d_embed``).
With ``model.adaptive.cutoffs`` the LM returns the adaptive softmax's log-probabilities (as
transformers' ``prediction_scores``); with ``div_val`` > 1 cluster i has its own tables
``word_embedding_i`` / ``embedding_projection_i`` / ``output_bias_i`` (cluster 0 keeps the
one-softmax names), and each cluster's softmax projection is ``output_projection[_i]`` unless
``tie_projs`` reuses the input one.

Differences from transformers, all outside what a trained model computes: ``memory=None`` means
no memory (transformers attends to ``mem_len`` zero vectors in the first segment; pass zeros
to reproduce that), and padding / document ids mask keys as in XLNet.
"""

import flax.linen as nn
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import heads, layers, recurrence
from bert_jax.models.attention import relative
from bert_jax.models.config import ModelConfig
from bert_jax.models.dropout import Dropout
from bert_jax.models.recurrence import attention_masks, last_token_index
from bert_jax.models.transformer_xl import adaptive_config, adaptive_softmax
from bert_jax.models.transformer_xl.layers import TransformerXLLayer


def attention_mask(input_mask_BL, memory_len: int, mem_len: int, same_length: bool, memory_ids_BN):
  """bool [B, L, memory_len + L]: True where query i may attend to key j.

  Causal over ``[memory; current]`` with XLNet's padding and document rules
  (`recurrence.attention_masks`); with ``same_length`` a query also ignores keys ``mem_len`` or more
  positions back, so every query sees the same number of keys (transformers' ``same_length``).
  """
  mask_BLK, _ = attention_masks(input_mask_BL, None, memory_len, True, memory_ids_BN)
  if not same_length:
    return mask_BLK
  length = input_mask_BL.shape[1]
  distance_LK = (memory_len + jnp.arange(length))[:, None] - jnp.arange(memory_len + length)[None]
  return mask_BLK & (distance_LK < mem_len)[None]


class TransformerXLEncoder(nn.Module):
  """Transformer-XL's trunk; ``__call__`` is the family interface, `streams` the full model.

  Attributes:
    config: the model configuration (``recurrence``, ``pre_layer_norm``,
      ``embedding_size`` are read here).
    deterministic: disables dropout.
  """

  config: ModelConfig
  deterministic: bool = True

  def setup(self):
    config = self.config
    # One table (and projection, when narrower than the model) unless div_val > 1 gives each
    # adaptive cluster its own; cluster i > 0's are named with the suffix _i.
    for i, (start, end, width) in enumerate(self._tables()):
      suffix = adaptive_softmax.suffix(i)
      setattr(
        self,
        f"word_embedding{suffix}",
        layers.embedding_table(config, end - start, width, (names.VOCAB, names.EMBED)),
      )
      if self._projected():
        setattr(
          self,
          f"embedding_projection{suffix}",
          nn.Dense(
            config.hidden_size,
            use_bias=False,
            dtype=jnp.dtype(config.dtype),
            param_dtype=jnp.float32,
            kernel_init=layers.normal_init(config, (None, names.EMBED)),
          ),
        )
    if not config.recurrence.untie_r:
      bias = lambda name: self.param(
        name,
        layers.normal_init(config, (names.HEADS, names.KV)),
        (config.num_heads, config.head_dim),
        jnp.float32,
      )
      self.r_w_bias, self.r_r_bias = bias("r_w_bias"), bias("r_r_bias")
    self.layers = [
      TransformerXLLayer(config, self.deterministic, name=f"layer_{i}")
      for i in range(config.num_layers)
    ]
    self.dropout = Dropout(config.hidden_dropout_rate)

  def _tables(self):
    """(first id, end id, width) of each word table: one, or one per cluster (div_val > 1)."""
    config = self.config
    if config.adaptive.div_val == 1:
      return [(0, config.vocab_size, config.embedding_width)]
    return adaptive_config.clusters(config)

  def _projected(self) -> bool:
    config = self.config
    return config.adaptive.div_val > 1 or config.embedding_width != config.hidden_size

  def embed(self, input_ids_BL):
    """Word vectors [B, L, D]: table lookup, projection to the model width, x sqrt(D); with
    per-cluster tables each id is looked up in its cluster's."""
    x_BLD = 0
    for i, (start, end, _) in enumerate(self._tables()):
      suffix = adaptive_softmax.suffix(i)
      inside_BL = (input_ids_BL >= start) & (input_ids_BL < end)
      e_BLE = getattr(self, f"word_embedding{suffix}")(
        jnp.where(inside_BL, input_ids_BL - start, 0)
      )
      if self._projected():
        e_BLE = getattr(self, f"embedding_projection{suffix}")(e_BLE)
      x_BLD = x_BLD + (
        e_BLE if end - start == self.config.vocab_size else e_BLE * inside_BL[..., None]
      )
    return x_BLD * jnp.sqrt(jnp.float32(self.config.hidden_size)).astype(x_BLD.dtype)

  def output_tables(self):
    """Per adaptive cluster: (word table [ids, E_i] float32, its input projection kernel
    [E_i, D] or None); the softmax reuses them (tied, as in transformers)."""
    result = []
    single = self.config.adaptive.div_val == 1
    for i, (start, end, _) in enumerate(adaptive_config.clusters(self.config)):
      suffix = adaptive_softmax.suffix(0 if single else i)
      table = getattr(self, f"word_embedding{suffix}").embedding
      kernel = (
        nn.unbox(getattr(self, f"embedding_projection{suffix}").variables["params"]["kernel"])
        if self._projected()
        else None
      )
      result.append((table[start:end] if single else table, kernel))
    return result

  def streams(
    self, input_ids_BL, token_type_ids_BL, input_mask_BL, memory=None, memory_ids_BN=None
  ):
    """Runs the backbone (the memory arguments of `xlnet.XLNetEncoder.streams`).

    Args:
      input_ids_BL: int token ids.
      token_type_ids_BL: unused (Transformer-XL has no segments); kept for the interface.
      input_mask_BL: int, 0 for padding; positive values are document ids.
      memory: per-layer memory, a sequence of ``num_layers`` arrays [B, N, D], or None.
      memory_ids_BN: the memory's document ids, or None (all memory visible).

    Returns:
      dict: ``content`` [B, L, D] after the final dropout, ``query`` None, and
      ``layer_inputs``: each layer's input (what `recurrence.next_memory` caches).
    """
    del token_type_ids_BL
    config = self.config
    dtype = jnp.dtype(config.dtype)
    length = input_ids_BL.shape[1]
    memory_len = 0 if memory is None else memory[0].shape[1]
    mask_BLK = attention_mask(
      input_mask_BL,
      memory_len,
      config.recurrence.mem_len,
      config.recurrence.same_length,
      memory_ids_BN,
    )
    # XLNet's distances run from +K to -L + 1; the causal mask hides the negative ones, and
    # clipping at clamp_len equals transformers' clamp of the non-negative ones.
    distances_P = relative.relative_distances(
      length, memory_len + length, config.recurrence.clamp_len
    )
    positions_PD = relative.sinusoid_encodings(distances_P, config.hidden_size)
    positions_PD = self.dropout(positions_PD.astype(dtype), self.deterministic)
    h_BLD = self.dropout(self.embed(input_ids_BL), self.deterministic)
    biases = None if config.recurrence.untie_r else (self.r_w_bias, self.r_r_bias)
    layer_inputs = []
    for i, layer in enumerate(self.layers):
      layer_inputs.append(h_BLD)
      layer_memory = None if memory is None else memory[i].astype(dtype)
      h_BLD = layer(h_BLD, layer_memory, positions_PD, mask_BLK, biases)
    return {
      "content": self.dropout(h_BLD, self.deterministic),
      "query": None,
      "layer_inputs": layer_inputs,
    }

  def __call__(self, input_ids_BL, token_type_ids_BL, input_mask_BL):
    """The family interface: (sequence [B, L, D], the last real token's state [B, D]), as
    transformers' ``TransfoXLForSequenceClassification`` summarises a sequence."""
    x_BLD = self.streams(input_ids_BL, token_type_ids_BL, input_mask_BL)["content"]
    index_B = last_token_index(input_mask_BL)
    return x_BLD, jnp.take_along_axis(x_BLD, index_B[:, None, None], axis=1)[:, 0]

  def attend(self, x_BPE):
    """Logits over the vocabulary through the tied word table (float32)."""
    return layers.tied_logits(self.word_embedding.embedding, x_BPE)


class TransformerXLLMHeadModel(nn.Module):
  """Transformer-XL with the tied LM projection, called like `xlnet.XLNetLMHeadModel`."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(
    self, input_ids_BL, token_type_ids_BL, input_mask_BL, memory=None, memory_ids_BN=None
  ):
    """Returns float32 ``logits`` [B, L, V] (token l's prediction of token l + 1; with an
    adaptive softmax they are its ``log_probs``, also returned under that key), the
    ``content`` stream, ``memory``: each layer's next memory (``model.recurrence.mem_len`` long, or
    everything when it is 0) and ``memory_ids``: its document ids (``input_mask_BL``'s values).
    """
    config = self.config
    encoder = TransformerXLEncoder(config, self.deterministic, name="bert")
    out = encoder.streams(input_ids_BL, token_type_ids_BL, input_mask_BL, memory, memory_ids_BN)
    x_BLE = out["content"]
    memories, memory_ids = recurrence.memory_outputs(
      memory, out["layer_inputs"], input_mask_BL, memory_ids_BN, config.recurrence.mem_len
    )
    outputs = {
      "content": out["content"],
      "memory": memories,
      "memory_ids": memory_ids,
    }
    if config.adaptive.cutoffs:
      log_probs_BLV = adaptive_softmax.log_probs(self, config, x_BLE, encoder.output_tables())
      # The log-probabilities are also valid logits (for argmax and softmax-based readers).
      return {**outputs, "log_probs": log_probs_BLV, "logits": log_probs_BLV}
    # The softmax projection: the model's own, or the input one when tie_projs[0] says so.
    _, input_kernel_ED = encoder.output_tables()[0]
    x_BLE = adaptive_softmax.project(config, 0, x_BLE, input_kernel_ED, config.embedding_width)
    bias_V = heads.output_bias(self, config)
    return {**outputs, "logits": encoder.attend(x_BLE) + bias_V}
