"""The Transformer encoder: BERT's post-LN blocks or Reformer's reversible pre-LN blocks.

Both kinds share the feed-forward, which may run over chunks of the sequence
(`ModelConfig.ffn_chunk_len`); remat and `nn.scan` over layers apply to either.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.models import layers, reversible
from bert_jax.models.attention.layer import SelfAttention
from bert_jax.models.config import ModelConfig
from bert_jax.models.dropout import Dropout

_ACTIVATION_AXES = ("activation_batch", "activation_length", "activation_embed")

_REMAT_POLICIES = {
  "full": jax.checkpoint_policies.nothing_saveable,
  "dots": jax.checkpoint_policies.checkpoint_dots,
  "dots_no_batch": jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims,
}


class DenseParams(nn.Module):
  """The kernel and bias of an `nn.Dense` (same names, shapes and init), returned as arrays.

  The feed-forward uses its weights inside `jax.lax.map` over chunks, where calling a Flax
  submodule is not allowed; holding them here keeps the parameter tree of an `nn.Dense`.
  """

  config: ModelConfig
  in_features: int
  features: int
  axes: tuple

  @nn.compact
  def __call__(self):
    kernel = self.param(
      "kernel",
      layers.normal_init(self.config, self.axes),
      (self.in_features, self.features),
      jnp.float32,
    )
    bias = self.param("bias", layers.zeros_init(self.axes[-1:]), (self.features,), jnp.float32)
    return kernel, bias


def feed_forward_params(config: ModelConfig, names=("intermediate", "output")):
  """The two dense layers of a feed-forward, named ``intermediate`` and ``output`` as in BERT.

  Pass ``names=(None, None)`` from a ``setup`` that assigns them to attributes of those names.
  """
  return (
    DenseParams(
      config, config.hidden_size, config.intermediate_size, ("embed", "mlp"), name=names[0]
    ),
    DenseParams(
      config, config.intermediate_size, config.hidden_size, ("mlp", "embed"), name=names[1]
    ),
  )


def chunked_feed_forward(x_BLD, weights, *, dtype, chunk_len: int):
  """GELU MLP of BERT, optionally over chunks of ``chunk_len`` positions.

  Chunks run one after another under `jax.lax.map` and each is rematerialised, so neither the
  forward nor the backward pass holds [B, L, intermediate] at once: one chunk's [B, Q, F] at a
  time. The length is zero-padded up to a multiple of ``chunk_len`` (positions are independent,
  so padding changes nothing) and the padding sliced off.

  Args:
    x_BLD: inputs.
    weights: ((kernel_in [D, F], bias_in [F]), (kernel_out [F, D], bias_out [D])).
    dtype: compute dtype of the matmuls.
    chunk_len: positions per chunk; 0 (or >= L) runs the whole sequence at once.

  Returns:
    [B, L, D] in ``dtype``.
  """
  (kernel_in_DF, bias_in_F), (kernel_out_FD, bias_out_D) = weights

  def mlp(x_BQD):
    h_BQF = x_BQD.astype(dtype) @ kernel_in_DF.astype(dtype) + bias_in_F.astype(dtype)[None, None]
    h_BQF = nn.with_logical_constraint(
      layers.gelu(h_BQF), ("activation_batch", "activation_length", "activation_mlp")
    )
    return h_BQF @ kernel_out_FD.astype(dtype) + bias_out_D.astype(dtype)[None, None]

  batch, length, width = x_BLD.shape
  if chunk_len <= 0 or chunk_len >= length:
    return mlp(x_BLD)
  n_chunks = -(-length // chunk_len)
  padded_BLD = jnp.pad(x_BLD, ((0, 0), (0, n_chunks * chunk_len - length), (0, 0)))
  x_CBQD = jnp.swapaxes(padded_BLD.reshape(batch, n_chunks, chunk_len, width), 0, 1)
  out_CBQD = jax.lax.map(jax.checkpoint(mlp), x_CBQD)
  out_BLD = jnp.swapaxes(out_CBQD, 0, 1).reshape(batch, n_chunks * chunk_len, width)
  return out_BLD[:, :length]


class EncoderBlock(nn.Module):
  """One BERT layer: x + Attn(x) -> LN -> h + FFN(h) -> LN (post-LN, as the original)."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, x_BLD, segment_ids_BL):
    config = self.config
    x_BLD = nn.with_logical_constraint(x_BLD, _ACTIVATION_AXES)
    attended_BLD = SelfAttention(config, self.deterministic, name="attention")(
      x_BLD, segment_ids_BL
    )
    attended_BLD = Dropout(config.hidden_dropout_rate)(
      attended_BLD, deterministic=self.deterministic
    )
    h_BLD = layers.layer_norm(config, "attention_norm")(x_BLD + attended_BLD)
    weights = tuple(holder() for holder in feed_forward_params(config))
    m_BLD = chunked_feed_forward(
      h_BLD, weights, dtype=jnp.dtype(config.dtype), chunk_len=config.ffn_chunk_len
    )
    m_BLD = Dropout(config.hidden_dropout_rate)(m_BLD, deterministic=self.deterministic)
    out_BLD = layers.layer_norm(config, "output_norm")(h_BLD + m_BLD)
    return nn.with_logical_constraint(out_BLD, _ACTIVATION_AXES)


class ReversibleBlock(nn.Module):
  """One Reformer layer on two streams: y1 = x1 + F(x2), y2 = x2 + G(y1).

  F = dropout(attention(LN(x))) and G = dropout(FFN(LN(x))), pre-LN as in the Reformer.
  `attend` and `feed_forward` are the halves `reversible.make_reversible_stack` runs;
  ``__call__`` applies both directly (initialisation, and the plain reference in tests).
  """

  config: ModelConfig
  deterministic: bool = True

  def setup(self):
    config = self.config
    self.attention_norm = layers.layer_norm(config, "attention_norm")
    self.attention = SelfAttention(config, self.deterministic, name="attention")
    self.attention_dropout = Dropout(config.hidden_dropout_rate)
    self.output_norm = layers.layer_norm(config, "output_norm")
    self.intermediate, self.output = feed_forward_params(config, names=(None, None))
    self.output_dropout = Dropout(config.hidden_dropout_rate)

  def attend(self, x_BLD, segment_ids_BL):
    x_BLD = nn.with_logical_constraint(x_BLD, _ACTIVATION_AXES)
    attended_BLD = self.attention(self.attention_norm(x_BLD), segment_ids_BL)
    return self.attention_dropout(attended_BLD, deterministic=self.deterministic)

  def feed_forward(self, x_BLD):
    x_BLD = nn.with_logical_constraint(x_BLD, _ACTIVATION_AXES)
    m_BLD = chunked_feed_forward(
      self.output_norm(x_BLD),
      (self.intermediate(), self.output()),
      dtype=jnp.dtype(self.config.dtype),
      chunk_len=self.config.ffn_chunk_len,
    )
    return self.output_dropout(m_BLD, deterministic=self.deterministic)

  def __call__(self, x1_BLD, x2_BLD, segment_ids_BL):
    y1_BLD = x1_BLD + self.attend(x2_BLD, segment_ids_BL)
    return y1_BLD, x2_BLD + self.feed_forward(y1_BLD)


class _ScannedBlock(nn.Module):
  """Adapts a block to `nn.scan`'s (carry, xs) -> (carry, ys) signature."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, carry, segment_ids_BL):
    if self.config.reversible:
      block = ReversibleBlock(self.config, self.deterministic, name="block")
      return block(*carry, segment_ids_BL), None
    block = _block_class(self.config)
    return block(self.config, self.deterministic, name="block")(carry, segment_ids_BL), None


def _block_class(config: ModelConfig):
  if config.remat_policy == "none":
    return EncoderBlock
  return nn.remat(
    EncoderBlock, policy=_REMAT_POLICIES[config.remat_policy], prevent_cse=not config.scan_layers
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
    block = _block_class(config)
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
    rng_names = []
    if config.attention_kind == "lsh":
      rng_names.append("hashing")
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
