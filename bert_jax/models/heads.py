"""The shared heads: the masked-LM head, and the output head every fine-tuning task puts on the
encoder (dropout, then a dense layer).

Task models (`bert_jax.tasks.*.model`) call `output_head` inside their own compact
``__call__``, so the dense layer's parameters sit directly under the head's name
(``classifier/kernel``, ``tagger/bias``, ...) and the dropout draws from the task model's own
``dropout`` stream, as when each task spelled the two layers out itself.
"""

import flax.linen as nn
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import layers
from bert_jax.models.config import ModelConfig
from bert_jax.models.dropout import Dropout


def output_head(
  config: ModelConfig, x_BxD, num_outputs: int, *, name: str, dropout: bool, deterministic: bool
):
  """Optional dropout, then a dense layer from the last axis of ``x_BxD`` to ``num_outputs``.

  Call it from a module's compact method: its layers become that module's children.

  Args:
    config: the model configuration (the dropout is ``hidden_dropout_rate``).
    x_BxD: encoder outputs [..., hidden_size] (pooled [B, D] or per token [B, L, D]).
    num_outputs: outputs per vector (labels, 2 for start/end, 1 for a score).
    name: the dense layer's name, i.e. the head's top-level name in the params tree.
    dropout: apply dropout first (the original BERT SQuAD head has none).
    deterministic: disables dropout (evaluation).

  Returns:
    float32 [..., num_outputs] logits.
  """
  if dropout:
    x_BxD = Dropout(config.hidden_dropout_rate)(x_BxD, deterministic)
  logits = layers.dense(config, num_outputs, (names.EMBED, names.CLASSES), name)(x_BxD)
  return logits.astype(jnp.float32)


def at_positions(x_BLD, positions_BP):
  """The rows of ``x_BLD`` at ``positions_BP`` [B, P] (the masked positions), or all of them
  when ``positions_BP`` is None."""
  if positions_BP is None:
    return x_BLD
  return jnp.take_along_axis(x_BLD, positions_BP[:, :, None], axis=1)


def output_bias(module: nn.Module, config: ModelConfig, name: str = "output_bias"):
  """A vocabulary-sized float32 bias of ``module`` (call from its compact method), zeros at
  init, shaped [1, 1, V] to add to logits [B, P, V]."""
  bias_V = module.param(name, layers.zeros_init((names.VOCAB,)), (config.vocab_size,), jnp.float32)
  return bias_V[None, None, :]


class MaskedLmHead(nn.Module):
  """Dense + GELU + LayerNorm, then the tied word table and an output bias."""

  config: ModelConfig
  width: int = 0  # Width of the word table; 0 = hidden_size (ALBERT's head works in E).

  @nn.compact
  def __call__(self, x_BPD, attend):
    config = self.config
    h_BPD = layers.activation(config)(
      layers.dense(config, self.width or config.hidden_size, ("embed", "mlp"), "transform")(x_BPD)
    )
    h_BPD = layers.layer_norm(config, "transform_norm")(h_BPD)
    return attend(h_BPD) + output_bias(self, config)
