"""XLM's encoder and LM, computing what transformers' ``XLMModel`` / ``XLMWithLMHeadModel`` do.

The layers are BERT's post-LN blocks (`models/encoder.py`: attention, dropout, residual,
LayerNorm; GELU feed-forward, residual, LayerNorm) and the embeddings BERT's tables. What
differs from BERT:

- embeddings: word + position + *language* (``model.xlm``; a table of one row per language,
  absent for a single language or ``use_lang_emb=False``), then LayerNorm and dropout; no
  token-type table and no scaling by sqrt(d). Positions are passed in (TLM restarts them at
  the second sentence); ``sinusoidal_embeddings`` fills the position table with sinusoids at
  init and keeps it fixed, as transformers does;
- padded positions are zeroed after the embeddings and after the stack (transformers
  multiplies every layer's output by the mask; keys are masked in attention, so only the
  padded rows themselves change, and those are zero either way);
- ``model.causal`` (CLM): each token sees itself and the tokens before it; the shared stack
  runs the ``local`` kernel with one causal chunk as long as the sequence (that kernel has
  no attention dropout: CLM training refuses a non-zero rate, tasks/xlm_pretraining.py);
- no pooler: fine-tuning heads get the first token's state (transformers' sequence summary
  ``"first"``);
- the LM head is XLM's ``pred_layer``: the tied word table plus a bias, no transform.
"""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bert_jax import names
from bert_jax.models import heads, layers
from bert_jax.models.config import ModelConfig
from bert_jax.models.dropout import Dropout
from bert_jax.models.embeddings import Embeddings, position_ids
from bert_jax.models.encoder import Encoder


def sinusoidal_table(n_positions: int, dim: int) -> np.ndarray:
  """transformers' ``create_sinusoidal_embeddings``: sin on even columns, cos on odd ones."""
  position_P1 = np.arange(n_positions)[:, None]
  column_1D = np.arange(dim)[None, :]
  angle_PD = position_P1 / np.power(10000, 2 * (column_1D // 2) / dim)
  return np.where(column_1D % 2 == 0, np.sin(angle_PD), np.cos(angle_PD)).astype(np.float32)


def _sinusoidal_init(key, shape, dtype=jnp.float32):
  del key
  return jnp.asarray(sinusoidal_table(*shape), dtype)


class XlmEmbeddings(Embeddings):
  """Word + position (+ language) embeddings; `attend` is BERT's tied output projection."""

  def setup(self):
    config = self.config
    options = config.xlm

    def embed(n, axes, name, init=None):
      return layers.embedding_table(config, n, config.embedding_width, axes, name, init)

    self.word_embeddings = embed(config.vocab_size, (names.VOCAB, names.EMBED), "word_embeddings")
    self.position_embeddings = embed(
      config.max_position_embeddings,
      (names.POSITIONS, names.EMBED),
      "position_embeddings",
      _sinusoidal_init if options.sinusoidal_embeddings else None,
    )
    if options.has_language_embeddings:
      self.language_embeddings = embed(
        options.n_langs, (names.TOKEN_TYPES, names.EMBED), "language_embeddings"
      )
    self.layer_norm = layers.layer_norm(config, "layer_norm")
    self.dropout = Dropout(config.hidden_dropout_rate)

  def __call__(self, input_ids_BL, position_ids_BL, language_ids_BL):
    positions_BLD = self.position_embeddings(position_ids_BL)
    if self.config.xlm.sinusoidal_embeddings:
      positions_BLD = jax.lax.stop_gradient(positions_BLD)  # transformers: requires_grad=False.
    x_BLD = self.word_embeddings(input_ids_BL) + positions_BLD
    if self.config.xlm.has_language_embeddings:
      x_BLD = x_BLD + self.language_embeddings(language_ids_BL)
    return self.dropout(self.layer_norm(x_BLD), deterministic=self.deterministic)


def _stack_config(config: ModelConfig, length: int) -> ModelConfig:
  """The shared stack's config: a causal model attends through one causal ``local`` chunk."""
  if not config.causal:
    return config
  lsh = dataclasses.replace(
    config.lsh, chunk_len=length, n_chunks_before=0, n_chunks_after=0, causal=True
  )
  return dataclasses.replace(config, attention_kind="local", lsh=lsh, reversible=False)


class XlmEncoder(nn.Module):
  """XLM's embeddings + the shared post-LN stack (transformers' ``XLMModel``).

  Attributes:
    config: the model configuration (``model.xlm`` holds the language options).
    deterministic: disables dropout (evaluation).
  """

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(
    self, input_ids_BL, token_type_ids_BL, input_mask_BL, position_ids_BL=None, language_ids_BL=None
  ):
    """Encodes a batch.

    Args:
      input_ids_BL: int token ids.
      token_type_ids_BL: accepted for the families' common signature and ignored (XLM has no
        token types; its segments are languages).
      input_mask_BL: int; 0 marks padding (positive values are document ids, as for BERT).
      position_ids_BL: int positions; None = 0..L-1 (TLM passes them restarted).
      language_ids_BL: int language ids (``model.xlm.languages`` order); None =
        ``model.xlm.language`` everywhere (fine-tuning tasks pass none).

    Returns:
      (sequence_output [B, L, D] with padded rows zero, first token's state [B, D]).
    """
    del token_type_ids_BL
    length = input_ids_BL.shape[1]
    absolute_BL = position_ids(self.config, input_ids_BL)  # Checks the length either way.
    if position_ids_BL is None:
      position_ids_BL = absolute_BL
    if language_ids_BL is None:
      language_ids_BL = jnp.full_like(input_ids_BL, self.config.xlm.default_language_id)
    real_BL1 = (input_mask_BL > 0)[:, :, None]
    embeddings = XlmEmbeddings(self.config, self.deterministic, name="embeddings")
    x_BLD = embeddings(input_ids_BL, position_ids_BL, language_ids_BL)
    x_BLD = jnp.where(real_BL1, x_BLD, 0).astype(x_BLD.dtype)
    stack = Encoder(_stack_config(self.config, length), self.deterministic, name="encoder")
    x_BLD = jnp.where(real_BL1, stack(x_BLD, input_mask_BL), 0).astype(x_BLD.dtype)
    return x_BLD, x_BLD[:, 0]


def word_table(encoder: XlmEncoder):
  """The (bound, already called) encoder's word table [V, D], float32."""
  return nn.unbox(encoder.variables["params"]["embeddings"]["word_embeddings"]["embedding"])


class XlmWithLMHead(nn.Module):
  """XLM with its LM head (``pred_layer``: tied word table + bias) at the predicted positions."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(
    self,
    input_ids_BL,
    token_type_ids_BL,
    input_mask_BL,
    masked_lm_positions_BP=None,
    position_ids_BL=None,
    language_ids_BL=None,
  ):
    """Returns float32 ``mlm_logits`` [B, P, V] (every position when positions are None)."""
    bert = XlmEncoder(self.config, self.deterministic, name="bert")
    x_BLD, _ = bert(
      input_ids_BL, token_type_ids_BL, input_mask_BL, position_ids_BL, language_ids_BL
    )
    x_BPD = heads.at_positions(x_BLD, masked_lm_positions_BP)
    return {"mlm_logits": PredLayer(self.config, name="mlm_head")(x_BPD, word_table(bert))}


class PredLayer(nn.Module):
  """transformers' ``pred_layer.proj``: logits = x @ word_table^T + bias (float32)."""

  config: ModelConfig

  @nn.compact
  def __call__(self, x_BPD, table_VD):
    logits_BPV = jnp.einsum(
      "bpd,vd->bpv", x_BPD, table_VD.astype(x_BPD.dtype), preferred_element_type=jnp.float32
    )
    return logits_BPV + heads.output_bias(self, self.config)
