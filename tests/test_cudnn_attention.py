"""cuDNN fused attention (attention_kind='cudnn'): its refusals, and, on a GPU, equality with
the dense kernel in outputs and gradients.

The GPU tests carry the ``gpu`` marker, which a run without a GPU deselects (tests/conftest.py);
run them on a GPU host with ``JAX_PLATFORMS=cuda,cpu python -m pytest -m gpu tests``.
"""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from bert_jax.errors import UserInputError
from bert_jax.models.attention import cudnn, dense
from bert_jax.models.bert.model import BertForPreTraining
from bert_jax.models.config import ModelConfig
from bert_jax.models.families import model_config_from_dict
from bert_jax.tasks.pretraining import PretrainingTask
from bert_jax.train import loop
from bert_jax.train import settings as settings_lib


def on_gpu(test):
  """Runs ``test`` on an NVIDIA GPU only, compiled as in training (XLA's optimisations on)."""
  return pytest.mark.optimized_xla(pytest.mark.gpu(test))


def test_config_refuses_what_the_kernel_cannot_run():
  bf16 = {"dtype": "bfloat16", "attention_dropout_rate": 0.0}
  with pytest.raises(UserInputError, match="'cudnn' runs in bf16, but model.dtype='float32'"):
    ModelConfig(attention_kind="cudnn", attention_dropout_rate=0.0)
  with pytest.raises(UserInputError, match="at most 128 and a multiple of 8, got head_dim=192"):
    ModelConfig(attention_kind="cudnn", hidden_size=192, num_heads=1, **bf16)
  with pytest.raises(UserInputError, match="'cudnn' has no attention-probability dropout"):
    ModelConfig(attention_kind="cudnn", dtype="bfloat16", attention_dropout_rate=0.1)
  ModelConfig(attention_kind="cudnn", **bf16)


def test_full_sentence_packing_is_refused():
  model = {"size": "tiny", "dtype": "bfloat16", "attention_dropout_rate": 0.0}
  data = {"packing": "full_sentences", "objective": "none"}
  config = ml_collections.ConfigDict({"task": "pretraining", "model": model, "data": data})
  config.model.attention_kind = "cudnn"
  with pytest.raises(UserInputError, match="cannot keep the documents of data.packing="):
    settings_lib.settings_from_config(config)
  config.model.attention_kind = "dense"
  settings_lib.settings_from_config(config)


def test_single_document_rows():
  segment_ids = jnp.array(
    [
      [1, 1, 1, 0, 0],  # One document, right-padded.
      [2, 2, 2, 2, 2],  # One document, no padding.
      [0, 0, 0, 0, 0],  # A filler row.
      [1, 1, 2, 2, 0],  # Two documents.
      [0, 1, 1, 1, 0],  # Left padding.
      [1, 1, 0, 1, 0],  # A hole.
    ]
  )
  np.testing.assert_array_equal(
    cudnn.single_document_rows(segment_ids), [True, True, True, False, False, False]
  )


@pytest.mark.no_gpu
def test_off_gpu_the_kind_is_refused():
  qkv = [jnp.zeros((1, 8, 2, 8), jnp.bfloat16)] * 3
  with pytest.raises(UserInputError, match="'cudnn' needs an NVIDIA GPU, but JAX runs on 'cpu'"):
    cudnn.cudnn_attention(*qkv, jnp.ones((1, 8), jnp.int32))


def test_non_finite_error_names_packed_rows_only_for_cudnn():
  cudnn_model = ModelConfig(attention_kind="cudnn", dtype="bfloat16", attention_dropout_rate=0.0)
  assert "several documents NaN" in loop._packed_rows_hint(cudnn_model)  # pylint: disable=protected-access
  assert loop._packed_rows_hint(ModelConfig()) == ""  # pylint: disable=protected-access


def _inputs(batch=4, length=128, heads=4, head_dim=64, seed=0):
  keys = jax.random.split(jax.random.key(seed), 3)
  query, key, value = (
    jax.random.normal(k, (batch, length, heads, head_dim), jnp.bfloat16) for k in keys
  )
  lengths = np.array([length, length - 37, 1, 0][:batch])
  segment_ids = jnp.asarray((np.arange(length)[None, :] < lengths[:, None]).astype(np.int32) * 3)
  return query, key, value, segment_ids


def _real(segment_ids):
  return (segment_ids != 0)[:, :, None, None]


@on_gpu
def test_matches_dense_outputs_and_gradients_without_dropout():
  query, key, value, segment_ids = _inputs()
  real = _real(segment_ids)
  weights = jax.random.normal(jax.random.key(5), query.shape, jnp.float32) * real

  def loss(kernel, q, k, v):
    return jnp.sum(kernel(q, k, v, segment_ids).astype(jnp.float32) * weights)

  def dense_f32(q, k, v, ids):
    return dense.dense_attention(*(x.astype(jnp.float32) for x in (q, k, v)), ids)

  got_out = jax.jit(cudnn.cudnn_attention)(query, key, value, segment_ids)
  want_out = jax.jit(dense_f32)(query, key, value, segment_ids)
  assert got_out.dtype == jnp.bfloat16
  np.testing.assert_allclose(
    np.asarray(jnp.where(real, got_out.astype(jnp.float32), 0)),
    np.asarray(jnp.where(real, want_out, 0)),
    atol=2e-2,
  )
  assert not np.any(np.asarray(jnp.where(real, 0, got_out)))  # Padding queries are zero.
  got = jax.jit(jax.grad(loss, argnums=(1, 2, 3)), static_argnums=0)(
    cudnn.cudnn_attention, query, key, value
  )
  want = jax.jit(jax.grad(loss, argnums=(1, 2, 3)), static_argnums=0)(dense_f32, query, key, value)
  for g, w in zip(got, want):
    scale = float(jnp.max(jnp.abs(w)))
    np.testing.assert_allclose(np.asarray(g.astype(jnp.float32)), np.asarray(w), atol=2e-2 * scale)


@on_gpu
def test_packed_rows_become_nan_and_other_rows_do_not():
  query, key, value, segment_ids = _inputs(batch=2, length=16, heads=2, head_dim=8)
  segment_ids = jnp.array([[1] * 10 + [0] * 6, [1] * 5 + [2] * 5 + [0] * 6])
  out = np.asarray(jax.jit(cudnn.cudnn_attention)(query, key, value, segment_ids), np.float32)
  assert np.all(np.isfinite(out[0]))
  assert np.all(np.isnan(out[1, :10]))


def _tiny_bert_logits_and_grads(kind):
  """Deterministic MLM logits and a dropout step's gradients of BERT-tiny (bf16)."""
  config = model_config_from_dict(
    {
      "size": "tiny",
      "dtype": "bfloat16",
      "vocab_size": 128,
      "attention_kind": kind,
      "attention_dropout_rate": 0.0,
    }
  )
  task = PretrainingTask(config, 64, 8)
  inputs = task.model_inputs(task.random_batch(4))  # Right-padded rows, masks on real tokens.
  variables = jax.jit(BertForPreTraining(config).init)(jax.random.key(0), *inputs)
  logits = jax.jit(BertForPreTraining(config).apply)(variables, *inputs)["mlm_logits"]
  training = BertForPreTraining(config, deterministic=False)

  def loss(v):
    out = training.apply(v, *inputs, rngs={"dropout": jax.random.key(3)})
    return jnp.sum(out["mlm_logits"].astype(jnp.float32))

  return logits, jax.jit(jax.grad(loss))(variables)


@on_gpu
def test_tiny_bert_gives_the_dense_outputs_and_a_finite_training_gradient():
  dense_logits, _ = _tiny_bert_logits_and_grads("dense")
  cudnn_logits, grads = _tiny_bert_logits_and_grads("cudnn")
  assert all(np.all(np.isfinite(np.asarray(g))) for g in jax.tree.leaves(grads))
  np.testing.assert_allclose(
    np.asarray(cudnn_logits, np.float32), np.asarray(dense_logits, np.float32), atol=5e-2
  )
