"""Optimizer pieces: clipping equals optax's, weight-decay mask, BERT's schedule."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bert_jax.train import optimizer as optimizer_lib


@pytest.mark.parametrize("scale", [0.01, 100.0], ids=["below_max", "above_max"])
def test_clip_equals_optax_clip_by_global_norm(scale):
  grads = {"a": jnp.arange(6.0).reshape(2, 3) * scale, "b": {"c": -jnp.ones(4) * scale}}
  ours, _ = optimizer_lib.clip_by_global_norm(1.0).update(grads, optax.EmptyState())
  theirs, _ = optax.clip_by_global_norm(1.0).update(grads, optax.EmptyState())
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), ours, theirs)
  assert optax.tree.norm(ours) == pytest.approx(min(1.0, float(optax.tree.norm(grads))), 1e-6)


def test_weight_decay_skips_layer_norm_and_biases():
  params = {
    "dense": {"kernel": 1.0, "bias": 1.0},
    "norm": {"scale": 1.0, "bias": 1.0},
    "embed": {"embedding": 1.0},
  }
  assert optimizer_lib.weight_decay_mask(params) == {
    "dense": {"kernel": True, "bias": False},
    "norm": {"scale": False, "bias": False},
    "embed": {"embedding": True},
  }


def test_adamw_decays_only_masked_params():
  config = optimizer_lib.OptimizerConfig(
    learning_rate=0.1, warmup_steps=0, weight_decay=0.5, max_grad_norm=0.0
  )
  optimizer = optimizer_lib.make_optimizer(config, num_train_steps=10)
  params = {"dense": {"kernel": jnp.ones(3), "bias": jnp.ones(3)}}
  zero_grads = jax.tree.map(jnp.zeros_like, params)
  updates, _ = optimizer.update(zero_grads, optimizer.init(params), params)
  np.testing.assert_allclose(updates["dense"]["bias"], 0.0)
  np.testing.assert_allclose(updates["dense"]["kernel"], -0.1 * 0.5, rtol=1e-6)


def test_schedule_warms_up_linearly_then_decays_to_zero():
  schedule = optimizer_lib.learning_rate_schedule(
    optimizer_lib.OptimizerConfig(learning_rate=1e-4, warmup_steps=100), 1000
  )
  assert float(schedule(0)) == 0.0
  assert float(schedule(50)) == pytest.approx(5e-5)
  assert float(schedule(100)) == pytest.approx(1e-4)
  assert float(schedule(550)) == pytest.approx(5e-5)
  assert float(schedule(1000)) == pytest.approx(0.0, abs=1e-12)


def test_unknown_optimizer_is_refused():
  with pytest.raises(ValueError, match="optimizer.name='sgd' is unknown; choose one of adamw"):
    optimizer_lib.OptimizerConfig(name="sgd")


def test_lamb_scales_each_layer_update_to_its_weight_norm():
  config = optimizer_lib.OptimizerConfig(
    name="lamb", learning_rate=0.01, warmup_steps=0, weight_decay=0.0, max_grad_norm=0.0
  )
  optimizer = optimizer_lib.make_optimizer(config, num_train_steps=10)
  params = {"a": {"kernel": jnp.full((4, 4), 3.0)}, "b": {"kernel": jnp.full((8,), 0.5)}}
  grads = {
    "a": {"kernel": jnp.arange(16.0).reshape(4, 4) - 7.5},
    "b": {"kernel": jnp.linspace(-1.0, 1.0, 8) * 1e-3},
  }
  updates, _ = optimizer.update(grads, optimizer.init(params), params)
  # Trust ratio: every layer moves by learning_rate * ||weights||, whatever its gradient scale.
  for name in ("a", "b"):
    assert float(optax.tree.norm(updates[name])) == pytest.approx(
      0.01 * float(optax.tree.norm(params[name])), rel=1e-4
    )
