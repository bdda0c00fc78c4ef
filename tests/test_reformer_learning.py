"""A tiny LSH encoder learns exact long-range key matching that local attention cannot reach.

Each sequence is 64 distinct key tokens, each carrying a value (one of 16, given as its token
type), followed by the same 64 keys in the same order with their values hidden. The model must
give every second-half position the value of its key's first occurrence, exactly 64 positions
back: found by matching the key token, whatever the positions. LSH hashes equal keys together;
local attention with the same chunk length and neighbours never sees a key more than 31
positions back, so it stays at chance (1/16).
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bert_jax.models import layers
from bert_jax.models.config import LshOptions, ModelConfig
from bert_jax.models.embeddings import Embeddings
from bert_jax.models.encoder import Encoder
from tests import xla_options

HALF = 64
N_KEYS = 256
FIRST_KEY_ID = 1
N_VALUES = 16
CHUNK_LEN = 16


class KeyValueModel(nn.Module):
  """Embeddings + encoder + a per-position classifier over the values."""

  config: ModelConfig

  @nn.compact
  def __call__(self, input_ids_BL, type_ids_BL):
    position_ids_BL = jnp.broadcast_to(jnp.arange(input_ids_BL.shape[1]), input_ids_BL.shape)
    x_BLD = Embeddings(self.config, name="embeddings")(input_ids_BL, type_ids_BL, position_ids_BL)
    x_BLD = Encoder(self.config, name="encoder")(x_BLD, jnp.ones_like(input_ids_BL))
    return layers.dense(self.config, N_VALUES, ("embed", "classes"), "classifier")(x_BLD).astype(
      jnp.float32
    )


def _batch(rng, batch_size):
  """Keys (word ids) with values (type ids) in the first half; the keys again, values hidden."""
  keys_BH = (
    np.stack([rng.choice(N_KEYS, size=HALF, replace=False) for _ in range(batch_size)])
    + FIRST_KEY_ID
  )
  values_BH = rng.integers(0, N_VALUES, size=(batch_size, HALF))
  input_ids_BL = np.concatenate([keys_BH, keys_BH], axis=1)
  type_ids_BL = np.concatenate([values_BH + 1, np.zeros_like(values_BH)], axis=1)
  targets_BL = np.concatenate([values_BH, values_BH], axis=1)
  weights_BL = np.concatenate([np.zeros(values_BH.shape), np.ones(values_BH.shape)], axis=1)
  return (
    input_ids_BL.astype(np.int32),
    type_ids_BL.astype(np.int32),
    targets_BL.astype(np.int32),
    weights_BL.astype(np.float32),
  )


def _train_accuracy(kind, steps=300, batch_size=16, learning_rate=3e-3):
  config = ModelConfig(
    vocab_size=FIRST_KEY_ID + N_KEYS,
    type_vocab_size=N_VALUES + 1,
    hidden_size=64,
    num_layers=1,
    num_heads=2,
    intermediate_size=128,
    max_position_embeddings=2 * HALF,
    hidden_dropout_rate=0.0,
    attention_dropout_rate=0.0,
    attention_kind=kind,
    reversible=kind != "dense",
    ffn_chunk_len=32,
    lsh=LshOptions(chunk_len=CHUNK_LEN, n_hashes=4, n_chunks_before=1, n_chunks_after=0),
  )
  model = KeyValueModel(config)
  data_rng = np.random.default_rng(0)

  def logits_fn(params, input_ids_BL, type_ids_BL, hash_rng):
    return model.apply({"params": params}, input_ids_BL, type_ids_BL, rngs={"hashing": hash_rng})

  def loss_fn(params, input_ids_BL, type_ids_BL, targets_BL, weights_BL, hash_rng):
    logits_BLV = logits_fn(params, input_ids_BL, type_ids_BL, hash_rng)
    losses_BL = optax.softmax_cross_entropy_with_integer_labels(logits_BLV, targets_BL)
    correct = jnp.sum((jnp.argmax(logits_BLV, axis=-1) == targets_BL) * weights_BL)
    return jnp.sum(losses_BL * weights_BL) / jnp.sum(weights_BL), correct

  optimizer = optax.adam(
    optax.warmup_cosine_decay_schedule(0.0, learning_rate, 20, steps, learning_rate / 10)
  )

  @jax.jit
  def train_step(params, opt_state, batch, hash_rng):
    """One update, and the weighted count of right values the params before it predict."""
    grads, correct = jax.grad(loss_fn, has_aux=True)(params, *batch, hash_rng)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, correct

  input_ids_BL, type_ids_BL, _, _ = _batch(data_rng, 1)
  params = nn.unbox(
    jax.jit(model.init)(
      {"params": jax.random.key(0), "hashing": jax.random.key(0)}, input_ids_BL, type_ids_BL
    )["params"]
  )
  opt_state = optimizer.init(params)
  for step in range(steps):
    params, opt_state, _ = train_step(
      params, opt_state, _batch(data_rng, batch_size), jax.random.key(step + 1)
    )

  # Held-out sequences scored by the train step's own forward pass (its update discarded):
  # one compiled program, where a separate forward program costs as much compiling as running.
  held_out = _batch(np.random.default_rng(1), 4 * batch_size)
  correct = sum(
    float(
      train_step(
        params,
        opt_state,
        tuple(array[start : start + batch_size] for array in held_out),
        jax.random.key(10_000),
      )[2]
    )
    for start in range(0, 4 * batch_size, batch_size)
  )
  return correct / float(np.sum(held_out[3]))


@pytest.fixture(scope="module")
def accuracies():
  with xla_options.optimized_xla():  # 300 steps each: optimised code pays for its compile.
    return {kind: _train_accuracy(kind) for kind in ("lsh", "local")}


def test_lsh_learns_long_range_matching(accuracies):
  assert accuracies["lsh"] > 0.9, accuracies


def test_local_attention_stays_near_chance(accuracies):
  assert accuracies["local"] < 2.0 / N_VALUES, accuracies
