"""EmbeddingTable: nn.Embed's values, float32 gradients, and no bf16 scatter in a bf16 step."""

import re

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models import embedding_table
from bert_jax.models.embedding_table import EmbeddingTable

_INIT = nn.initializers.normal(stddev=0.5)


def _tables(rows, dtype):
  ours = EmbeddingTable(rows, 8, dtype=dtype, embedding_init=_INIT)
  flax_embed = nn.Embed(rows, 8, dtype=dtype, param_dtype=jnp.float32, embedding_init=_INIT)
  return ours, flax_embed


@pytest.mark.parametrize("rows", [2, embedding_table.SELECT_MAX_ROWS, 50])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_rows_equal_flax_embed_bitwise(rows, dtype):
  ours, flax_embed = _tables(rows, dtype)
  ids = jax.random.randint(jax.random.key(1), (4, 9), 0, rows)
  params = ours.init(jax.random.key(0), ids)
  got = ours.apply(params, ids)
  want = flax_embed.apply(params, ids)  # The same parameter tree.
  assert got.dtype == want.dtype == dtype
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


@pytest.mark.parametrize("rows", [2, 50])
def test_bf16_gradient_is_summed_in_float32(rows):
  """4,096 tokens of one id: a bf16 sum of their gradients stalls (256 + 1.0 rounds to 256
  in bf16); the table's gradient is the float32 sum."""
  ours, flax_embed = _tables(rows, jnp.bfloat16)
  ids = jnp.zeros((64, 64), jnp.int32).at[0, 0].set(1)
  params = ours.init(jax.random.key(0), ids)

  def grad_of(module):
    return jax.grad(lambda p: module.apply(p, ids).astype(jnp.float32).sum())(params)

  got = grad_of(ours)["params"]["embedding"]
  assert got.dtype == jnp.float32
  np.testing.assert_allclose(np.asarray(got[0]), np.full(8, 4095.0), rtol=0)
  np.testing.assert_allclose(np.asarray(got[1]), np.ones(8), rtol=0)
  stalled = grad_of(flax_embed)["params"]["embedding"]  # Why this module exists.
  assert np.all(np.asarray(stalled[0]) < 4095.0)


@pytest.mark.parametrize("rows", [3, 50])
def test_float32_gradient_equals_flax_embed(rows):
  ours, flax_embed = _tables(rows, jnp.float32)
  ids = jax.random.randint(jax.random.key(2), (8, 16), 0, rows)
  params = ours.init(jax.random.key(0), ids)
  weights = jax.random.normal(jax.random.key(3), (8, 16, 8))

  def grad_of(module):
    return jax.grad(lambda p: (module.apply(p, ids) * weights).sum())(params)

  np.testing.assert_allclose(
    grad_of(ours)["params"]["embedding"],
    grad_of(flax_embed)["params"]["embedding"],
    rtol=1e-6,
    atol=1e-6,
  )


def test_non_integer_ids_are_refused():
  ours, _ = _tables(4, jnp.float32)
  with pytest.raises(ValueError, match="must be integers"):
    ours.init(jax.random.key(0), jnp.zeros((2, 3), jnp.float32))


def test_bf16_bert_embeddings_backward_has_no_bf16_scatter_and_none_into_token_types():
  """The structural property behind the GPU fix: BERT's embeddings in a bf16 run scatter their
  gradients in float32 (word and position tables) and not at all into the 2-row token-type
  table, whose bf16 scatter took 43% of BERT-base's step on an H200."""
  from bert_jax.models import families  # pylint: disable=g-import-not-at-top
  from bert_jax.models.config import ModelConfig  # pylint: disable=g-import-not-at-top
  from bert_jax.models.embeddings import Embeddings  # pylint: disable=g-import-not-at-top

  del families
  config = ModelConfig(
    vocab_size=64, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
    dtype="bfloat16", hidden_dropout_rate=0.0,
  )  # fmt: skip
  module = Embeddings(config)
  ids = jnp.ones((4, 8), jnp.int32)
  types = jnp.zeros((4, 8), jnp.int32)
  positions = jnp.broadcast_to(jnp.arange(8), (4, 8))
  params = module.init(jax.random.key(0), ids, types, positions)
  grad = jax.jit(
    jax.grad(lambda p: module.apply(p, ids, types, positions).astype(jnp.float32).sum())
  )
  # The program as traced: a CPU compile upcasts bf16 scatters itself, a GPU's does not.
  hlo = grad.lower(params).as_text(dialect="hlo")
  scatters = re.findall(r"= (\w+)\[([\d,]*)\][^ ]* scatter\(", hlo)
  assert scatters, "expected the word and position tables' scatter-adds"
  assert all(dtype == "f32" for dtype, _ in scatters), scatters
  assert not [dims for _, dims in scatters if dims.split(",")[0] == str(config.type_vocab_size)]
