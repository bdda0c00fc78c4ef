"""BERT input embeddings: word + position + token type, then LayerNorm and dropout."""

import flax.linen as nn
import jax.numpy as jnp

from bert_jax.models import layers
from bert_jax.models.config import ModelConfig
from bert_jax.models.dropout import Dropout


def position_ids(config: ModelConfig, input_ids_BL):
  """Absolute positions 0..L-1 [B, L] (int32) of a batch of ``input_ids_BL``.

  Raises:
    ValueError: the sequence is longer than the position table.
  """
  length = input_ids_BL.shape[1]
  if length > config.max_position_embeddings:
    raise ValueError(
      f"sequence length {length} exceeds model.max_position_embeddings="
      f"{config.max_position_embeddings}"
    )
  return jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), input_ids_BL.shape)


class Embeddings(nn.Module):
  """Sums word, position and token-type embeddings.

  The word table is also the MLM output matrix (`attend`), as in the original BERT. The tables
  are ``model.embedding_size`` wide when it is set (ALBERT / ELECTRA factorised embeddings; the
  family projects them to the hidden size), else ``hidden_size`` wide.
  """

  config: ModelConfig
  deterministic: bool = True

  def setup(self):
    config = self.config
    embed = lambda n, axes, name: layers.embedding_table(  # pylint: disable=g-long-lambda
      config, n, config.embedding_width, axes, name
    )
    self.word_embeddings = embed(config.vocab_size, ("vocab", "embed"), "word_embeddings")
    self.position_embeddings = embed(
      config.max_position_embeddings, ("positions", "embed"), "position_embeddings"
    )
    self.token_type_embeddings = embed(
      config.type_vocab_size, ("token_types", "embed"), "token_type_embeddings"
    )
    self.layer_norm = layers.layer_norm(config, "layer_norm")
    self.dropout = Dropout(config.hidden_dropout_rate)

  def __call__(self, input_ids_BL, token_type_ids_BL, position_ids_BL):
    x_BLD = (
      self.word_embeddings(input_ids_BL)
      + self.position_embeddings(position_ids_BL)
      + self.token_type_embeddings(token_type_ids_BL)
    )
    x_BLD = self.layer_norm(x_BLD)
    return self.dropout(x_BLD, deterministic=self.deterministic)

  def attend(self, x_BPD):
    """Logits over the vocabulary from hidden states, through the tied word table (float32)."""
    return layers.tied_logits(self.word_embeddings.embedding, x_BPD)
