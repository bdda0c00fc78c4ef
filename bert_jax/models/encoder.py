"""The Transformer encoder: a stack of BERT's post-LN or Reformer's reversible pre-LN blocks.

The blocks live in `models/blocks.py`; this module stacks them, unrolled or under `nn.scan`,
with the configured remat policy, and runs the reversible stack's custom backward pass.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.models import layers, reversible
from bert_jax.models.attention import kinds as attention_kinds
from bert_jax.models.blocks import EncoderBlock, ReversibleBlock
from bert_jax.models.config import ModelConfig

_REMAT_POLICIES = {
  "full": jax.checkpoint_policies.nothing_saveable,
  "dots": jax.checkpoint_policies.checkpoint_dots,
  "dots_no_batch": jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims,
}


class _ScannedBlock(nn.Module):
  """Adapts a block to `nn.scan`'s (carry, xs) -> (carry, ys) signature."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, carry, segment_ids_BL):
    if self.config.reversible:
      block = ReversibleBlock(self.config, self.deterministic, name="block")
      return block(*carry, segment_ids_BL), None
    block = remat(EncoderBlock, self.config)
    return block(self.config, self.deterministic, name="block")(carry, segment_ids_BL), None


def remat(module_class, config: ModelConfig):
  """``module_class`` under ``model.remat_policy`` (itself for "none")."""
  if config.remat_policy == "none":
    return module_class
  return nn.remat(
    module_class, policy=_REMAT_POLICIES[config.remat_policy], prevent_cse=not config.scan_layers
  )


class Encoder(nn.Module):
  """A stack of `num_layers` encoder blocks.

  Unscanned, layer i's parameters live under ``layer_<i>``; scanned, they are stacked on a
  leading ``layers`` axis under ``layers/block`` (one compiled body, faster compiles on pods).
  With ``config.reversible`` the blocks are `ReversibleBlock`s on two copies of the input whose
  outputs are averaged and normalised by ``final_norm`` (see models/reversible.py).
  """

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, x_BLD, segment_ids_BL):
    config = self.config
    if config.reversible:
      y1_BLD, y2_BLD = self._reversible_layers(x_BLD, segment_ids_BL)
      return layers.layer_norm(config, "final_norm")(0.5 * (y1_BLD + y2_BLD))
    if config.scan_layers:
      x_BLD, _ = self._scanned()(x_BLD, segment_ids_BL)
      return x_BLD
    block = remat(EncoderBlock, config)
    for i in range(config.num_layers):
      x_BLD = block(config, self.deterministic, name=f"layer_{i}")(x_BLD, segment_ids_BL)
    return x_BLD

  def _scanned(self):
    scanned = nn.scan(
      _ScannedBlock,
      variable_axes={"params": 0},
      split_rngs={"params": True, "dropout": True, "hashing": True},
      in_axes=nn.broadcast,
      length=self.config.num_layers,
      metadata_params={nn.PARTITION_NAME: "layers"},
    )
    return scanned(self.config, self.deterministic, name="layers")

  def _reversible_layers(self, x_BLD, segment_ids_BL):
    """(y1, y2) of the reversible stack on (x, x); the backward pass recomputes activations."""
    config = self.config
    if self.is_initializing():
      # Creating parameters needs the ordinary module calls; nothing is differentiated here.
      if config.scan_layers:
        return self._scanned()((x_BLD, x_BLD), segment_ids_BL)[0]
      streams = (x_BLD, x_BLD)
      for i in range(config.num_layers):
        streams = ReversibleBlock(config, self.deterministic, name=f"layer_{i}")(
          *streams, segment_ids_BL
        )
      return streams
    params = self.variables["params"]
    if config.scan_layers:
      params_N = params["layers"]["block"]
    else:
      params_N = jax.tree.map(
        lambda *leaves: jnp.stack(leaves), *[params[f"layer_{i}"] for i in range(config.num_layers)]
      )
    rng_names = list(attention_kinds.get(config.attention_kind).rngs)
    if not self.deterministic:
      rng_names.append("dropout")
    rngs_N = {name: jax.random.split(self.make_rng(name), config.num_layers) for name in rng_names}
    block = ReversibleBlock(config, self.deterministic, parent=None)

    def attend(layer_params, x_BLD, segment_ids_BL, layer_rngs):
      return block.apply(
        {"params": layer_params},
        x_BLD,
        segment_ids_BL,
        rngs=layer_rngs,
        method=ReversibleBlock.attend,
      )

    def feed_forward_half(layer_params, x_BLD, segment_ids_BL, layer_rngs):
      del segment_ids_BL
      return block.apply(
        {"params": layer_params}, x_BLD, rngs=layer_rngs, method=ReversibleBlock.feed_forward
      )

    stack = reversible.make_reversible_stack(attend, feed_forward_half)
    return stack(params_N, x_BLD, x_BLD, segment_ids_BL, rngs_N)
