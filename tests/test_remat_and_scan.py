"""Remat policies and scan over layers change memory and compile time, never the numbers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models.bert.model import BertForPreTraining
from bert_jax.models.families import model_config_from_dict
from bert_jax.parallel import sharding
from bert_jax.tasks.pretraining import PretrainingTask

_MODEL = {"size": "tiny", "num_layers": 3, "vocab_size": 300, "max_position_embeddings": 32}


def _loss_and_grads(model_overrides, params, batch):
  config = model_config_from_dict(dict(_MODEL, **model_overrides))
  task = PretrainingTask(config, 32, 4)

  def loss(p):
    outputs = BertForPreTraining(config, deterministic=True).apply(
      {"params": p}, *task.model_inputs(batch)
    )
    return task.loss_and_sums(outputs, batch, task.denominators(batch))[0]

  return jax.jit(jax.value_and_grad(loss))(params)


def _stack_layers(params, num_layers):
  """Unscanned layer_<i> params -> the scanned layout (leading layer axis)."""
  encoder = dict(params["bert"]["encoder"])
  layers = [encoder.pop(f"layer_{i}") for i in range(num_layers)]
  encoder["layers"] = {"block": jax.tree.map(lambda *xs: jnp.stack(xs), *layers)}
  return {**params, "bert": {**params["bert"], "encoder": encoder}}


def _assert_float32_close(got, want):
  """Equal up to float32 rounding in another summation order: 1e-5 relative, and absolute
  1e-7 or 1e-6 of the array's largest value (a sum over many rows that nearly cancels, such as
  a token-type embedding's gradient, keeps the absolute error of its largest terms)."""
  atol = max(1e-7, 1e-6 * float(np.max(np.abs(want))))
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol)


@pytest.fixture(scope="module")
def reference():
  config = model_config_from_dict(_MODEL)
  task = PretrainingTask(config, 32, 4)
  batch = {k: jnp.asarray(v) for k, v in task.random_batch(4).items()}
  params = sharding.strip_boxes(
    BertForPreTraining(config).init(jax.random.key(0), *task.model_inputs(batch))["params"]
  )
  return params, batch, _loss_and_grads({}, params, batch)


@pytest.mark.parametrize("policy", ["full", "dots", "dots_no_batch"])
def test_remat_equals_no_remat(reference, policy):
  params, batch, (loss, grads) = reference
  remat_loss, remat_grads = _loss_and_grads({"remat_policy": policy}, params, batch)
  np.testing.assert_allclose(remat_loss, loss, rtol=1e-6)
  jax.tree.map(_assert_float32_close, remat_grads, grads)


@pytest.mark.parametrize("policy", ["none", "full"])
def test_scan_over_layers_equals_unrolled_layers(reference, policy):
  params, batch, (loss, grads) = reference
  scanned_loss, scanned_grads = _loss_and_grads(
    {"scan_layers": True, "remat_policy": policy}, _stack_layers(params, 3), batch
  )
  np.testing.assert_allclose(scanned_loss, loss, rtol=1e-6)
  jax.tree.map(_assert_float32_close, scanned_grads, _stack_layers(grads, 3))
