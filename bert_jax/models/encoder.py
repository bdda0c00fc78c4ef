"""The post-LayerNorm Transformer encoder of BERT, with remat and optional scan over layers."""

import flax.linen as nn
import jax

from bert_jax.attention.layer import SelfAttention
from bert_jax.models import layers
from bert_jax.models.dropout import Dropout
from bert_jax.models.config import ModelConfig

_ACTIVATION_AXES = ("activation_batch", "activation_length", "activation_embed")

_REMAT_POLICIES = {
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.checkpoint_dots,
    "dots_no_batch": jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims,
}


class EncoderBlock(nn.Module):
  """One BERT layer: x + Attn(x) -> LN -> h + FFN(h) -> LN (post-LN, as the original)."""
  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, x_BLD, segment_ids_BL):
    config = self.config
    x_BLD = nn.with_logical_constraint(x_BLD, _ACTIVATION_AXES)
    attended_BLD = SelfAttention(config, self.deterministic, name="attention")(
        x_BLD, segment_ids_BL)
    attended_BLD = Dropout(config.hidden_dropout_rate)(
        attended_BLD, deterministic=self.deterministic)
    h_BLD = layers.layer_norm(config, "attention_norm")(x_BLD + attended_BLD)
    m_BLF = layers.dense(config, config.intermediate_size, ("embed", "mlp"),
                         "intermediate")(h_BLD)
    m_BLF = nn.with_logical_constraint(
        layers.gelu(m_BLF), ("activation_batch", "activation_length", "activation_mlp"))
    m_BLD = layers.dense(config, config.hidden_size, ("mlp", "embed"), "output")(m_BLF)
    m_BLD = Dropout(config.hidden_dropout_rate)(m_BLD, deterministic=self.deterministic)
    out_BLD = layers.layer_norm(config, "output_norm")(h_BLD + m_BLD)
    return nn.with_logical_constraint(out_BLD, _ACTIVATION_AXES)


class _ScannedBlock(nn.Module):
  """Adapts `EncoderBlock` to `nn.scan`'s (carry, xs) -> (carry, ys) signature."""
  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, x_BLD, segment_ids_BL):
    block = _block_class(self.config)
    return block(self.config, self.deterministic, name="block")(x_BLD, segment_ids_BL), None


def _block_class(config: ModelConfig):
  if config.remat_policy == "none":
    return EncoderBlock
  return nn.remat(EncoderBlock, policy=_REMAT_POLICIES[config.remat_policy],
                  prevent_cse=not config.scan_layers)


class Encoder(nn.Module):
  """A stack of `num_layers` encoder blocks.

  Unscanned, layer i's parameters live under ``layer_<i>``; scanned, they are stacked on a
  leading ``layers`` axis under ``layers/block`` (one compiled body, faster compiles on pods).
  """
  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, x_BLD, segment_ids_BL):
    config = self.config
    if config.scan_layers:
      scanned = nn.scan(
          _ScannedBlock, variable_axes={"params": 0}, split_rngs={"params": True,
                                                                  "dropout": True,
                                                                  "hashing": True},
          in_axes=nn.broadcast, length=config.num_layers,
          metadata_params={nn.PARTITION_NAME: "layers"})
      x_BLD, _ = scanned(config, self.deterministic, name="layers")(x_BLD, segment_ids_BL)
      return x_BLD
    block = _block_class(config)
    for i in range(config.num_layers):
      x_BLD = block(config, self.deterministic, name=f"layer_{i}")(x_BLD, segment_ids_BL)
    return x_BLD
