"""Reversible blocks and chunked feed-forward: same numbers as the plain computation, any mesh."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.errors import UserInputError
from bert_jax.models import blocks, reversible
from bert_jax.models import encoder as encoder_lib
from bert_jax.models.config import LshOptions, ModelConfig
from bert_jax.train.settings import settings_from_config
from tests import helpers

LENGTH = 64
N_LAYERS = 3


def _config(kind, **overrides):
  # Initialised 5x wider than BERT so each half moves the streams visibly.
  fields = dict(
    vocab_size=64,
    hidden_size=32,
    num_layers=N_LAYERS,
    num_heads=2,
    intermediate_size=64,
    max_position_embeddings=LENGTH,
    attention_kind=kind,
    reversible=True,
    ffn_chunk_len=16,
    hidden_dropout_rate=0.1,
    initializer_range=0.1,
    attention_dropout_rate=0.0,
    lsh=LshOptions(chunk_len=16, n_hashes=2),
  )
  fields.update(overrides)
  return ModelConfig(**fields)


def _inputs(batch=2, length=LENGTH):
  x_BLD = jax.random.normal(jax.random.key(0), (batch, length, 32))
  segment_ids_BL = jnp.ones((batch, length), jnp.int32).at[1, 50:].set(0)  # Padding in row 1.
  return x_BLD, segment_ids_BL


def _init_encoder(config):
  x_BLD, segment_ids_BL = _inputs()
  variables = encoder_lib.Encoder(config).init(
    {"params": jax.random.key(1), "hashing": jax.random.key(2)}, x_BLD, segment_ids_BL
  )
  return nn.unbox(variables["params"])


def _assert_close(actual, expected):
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5), actual, expected
  )


@pytest.mark.parametrize("kind", ["lsh", "local"])
def test_recomputing_stack_equals_plain_equations(kind):
  """Outputs and gradients (params and inputs) of the custom-VJP stack vs plain autodiff.

  Dropout is on and LSH hashes are random, so this also checks that the backward pass reuses
  each layer's forward rngs.
  """
  config = _config(kind)
  params = _init_encoder(config)
  layer_params = [params[f"layer_{i}"] for i in range(N_LAYERS)]
  x_BLD, segment_ids_BL = _inputs()
  layer_rngs = [
    {"dropout": jax.random.key(10 + i), "hashing": jax.random.key(20 + i)} for i in range(N_LAYERS)
  ]
  block = blocks.ReversibleBlock(config, deterministic=False)
  cotangents = tuple(jax.random.normal(jax.random.key(k), x_BLD.shape) for k in (3, 4))

  def plain(layer_params, x_BLD):
    # y1 = x1 + F(x2); y2 = x2 + G(y1), written out layer by layer; autodiff stores everything.
    streams = (x_BLD, x_BLD)
    for p, rngs in zip(layer_params, layer_rngs):
      streams = block.apply({"params": p}, *streams, segment_ids_BL, rngs=rngs)
    return streams

  stack = reversible.make_reversible_stack(
    lambda p, h, seg, rngs: block.apply(
      {"params": p}, h, seg, rngs=rngs, method=blocks.ReversibleBlock.attend
    ),
    lambda p, h, seg, rngs: block.apply(
      {"params": p}, h, rngs=rngs, method=blocks.ReversibleBlock.feed_forward
    ),
  )

  def recomputed(layer_params, x_BLD):
    stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves), *layer_params)
    rngs_N = jax.tree.map(lambda *keys: jnp.stack(keys), *layer_rngs)
    return stack(stacked, x_BLD, x_BLD, segment_ids_BL, rngs_N)

  def outputs_and_grads(fn):
    outputs, vjp = jax.vjp(jax.jit(fn), layer_params, x_BLD)
    return outputs, vjp(cotangents)

  expected = outputs_and_grads(plain)
  actual = outputs_and_grads(recomputed)
  assert float(jnp.max(jnp.abs(expected[0][0] - expected[0][1]))) > 0.1  # Streams differ.
  _assert_close(actual, expected)


def test_reversible_encoder_equals_its_blocks_written_out():
  """The Encoder's wiring: duplicate, N reversible blocks, average, final LayerNorm."""
  config = _config("local")
  params = _init_encoder(config)
  x_BLD, segment_ids_BL = _inputs()
  block = blocks.ReversibleBlock(config)
  final_norm = nn.LayerNorm(epsilon=config.layer_norm_eps)

  def plain(params, x_BLD):
    streams = (x_BLD, x_BLD)
    for i in range(N_LAYERS):
      streams = block.apply({"params": params[f"layer_{i}"]}, *streams, segment_ids_BL)
    return final_norm.apply({"params": params["final_norm"]}, 0.5 * (streams[0] + streams[1]))

  def model(params, x_BLD):
    return encoder_lib.Encoder(config).apply({"params": params}, x_BLD, segment_ids_BL)

  cotangent_BLD = jax.random.normal(jax.random.key(5), x_BLD.shape)
  results = []
  for fn in (plain, model):
    out_BLD, vjp = jax.vjp(jax.jit(fn), params, x_BLD)
    results.append((out_BLD, vjp(cotangent_BLD)))
  _assert_close(results[1], results[0])


@pytest.mark.parametrize("length", [64, 56])  # 56: not a multiple of the chunk, padded inside.
def test_chunked_feed_forward_equals_unchunked(length):
  config = _config(
    "dense", reversible=False, num_layers=1, hidden_dropout_rate=0.0, ffn_chunk_len=0
  )
  x_BLD = jax.random.normal(jax.random.key(0), (2, length, 32))
  segment_ids_BL = jnp.ones((2, length), jnp.int32)
  params = nn.unbox(
    blocks.EncoderBlock(config).init(jax.random.key(1), x_BLD, segment_ids_BL)["params"]
  )
  results = []
  for chunk_len in (0, 16):
    chunked = _config(
      "dense", reversible=False, num_layers=1, hidden_dropout_rate=0.0, ffn_chunk_len=chunk_len
    )
    fn = lambda p, x, c=chunked: blocks.EncoderBlock(c).apply({"params": p}, x, segment_ids_BL)
    out_BLD, vjp = jax.vjp(jax.jit(fn), params, x_BLD)
    results.append((out_BLD, vjp(jnp.cos(out_BLD))))
  _assert_close(results[1], results[0])


@pytest.mark.parametrize("kind", ["lsh", "local"])
def test_reversible_train_step_same_on_one_and_eight_devices(kind):
  overrides = {
    "model.attention_kind": kind,
    "model.reversible": True,
    "model.ffn_chunk_len": 8,
    "model.lsh.chunk_len": 8,
    "model.lsh.n_hashes": 2,
    "data.objective": "none",
  }
  _, params_1, metrics_1, _ = helpers.one_train_step(
    helpers.small_config(**overrides, **{"mesh.data": 1}), jax.devices()[:1]
  )
  _, params_8, metrics_8, _ = helpers.one_train_step(
    helpers.small_config(**overrides, **{"mesh.data": 2, "mesh.tensor": 4}), jax.devices()
  )
  assert np.isfinite(metrics_1["mlm_loss"]) and metrics_1["grad_norm"] > 0
  for key in ("mlm_loss", "mlm_accuracy", "grad_norm"):
    np.testing.assert_allclose(metrics_8[key], metrics_1[key], rtol=2e-5, err_msg=key)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-4), params_8, params_1
  )


def _backward_temp_bytes(config):
  """Scratch memory XLA plans for a forward+backward of the encoder (compiled, not run)."""
  x_BLD, segment_ids_BL = _inputs(length=1024)
  params = jax.eval_shape(lambda: _init_encoder(config))

  def loss(params, x_BLD):
    out_BLD = encoder_lib.Encoder(config).apply(
      {"params": params}, x_BLD, segment_ids_BL, rngs={"hashing": jax.random.key(0)}
    )
    return jnp.sum(out_BLD**2)

  compiled = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(params, x_BLD).compile()
  return compiled.memory_analysis().temp_size_in_bytes


def test_reversible_scratch_memory_does_not_grow_with_depth():
  sizes = {}
  for is_reversible in (True, False):
    for depth in (2, 4):  # The ordinary stack's compile time grows with its unrolled depth.
      config = _config("lsh", reversible=is_reversible, num_layers=depth, hidden_dropout_rate=0.0)
      sizes[is_reversible, depth] = _backward_temp_bytes(config)
  # Both grow by parameter-sized buffers (stacked weights and their gradients); only the
  # ordinary stack also keeps every layer's activations for the backward pass.
  reversible_growth = sizes[True, 4] - sizes[True, 2]
  ordinary_growth = sizes[False, 4] - sizes[False, 2]
  assert reversible_growth < 0.1 * ordinary_growth, sizes


@pytest.mark.parametrize(
  "overrides, message",
  [
    ({"model.attention_kind": "lsh", "model.lsh.chunk_len": 12}, "not a multiple of"),
    ({"model.attention_kind": "local", "model.lsh.chunk_len": 24}, "not a multiple of"),
    ({"model.lsh.n_buckets": 7}, "must be even"),
    ({"model.lsh.n_hashes": 0}, "must be >= 1"),
    ({"model.reversible": True, "model.remat_policy": "full"}, "remat_policy='none'"),
    ({"model.ffn_chunk_len": -1}, "must be >= 0"),
  ],
)
def test_bad_reformer_config_is_a_one_line_error(overrides, message):
  with pytest.raises(UserInputError, match=message) as error:
    settings_from_config(helpers.small_config(**overrides))
  assert "\n" not in str(error.value)
