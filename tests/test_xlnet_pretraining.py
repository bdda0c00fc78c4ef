"""XLNet's permutation LM: valid factorisation orders, and the objective trains on the trainer's
own step (`train/step.py`) with the pretraining task of `model.family=xlnet`."""

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bert_jax.data.pretraining_config import PretrainingDataConfig
from bert_jax.errors import UserInputError
from bert_jax.models.families import model_config_from_dict
from bert_jax.models.recurrence_options import with_recurrence
from bert_jax.models.xlnet import permutation
from bert_jax.tasks import pretraining
from bert_jax.train import step as step_lib
from bert_jax.train.state import TrainState
from tests import helpers

TINY = model_config_from_dict(
  dict(
    family="xlnet",
    vocab_size=97,
    hidden_size=32,
    num_layers=2,
    num_heads=2,
    intermediate_size=64,
    hidden_dropout_rate=0.0,
    attention_dropout_rate=0.0,
  )
)


def test_permutation_mask_is_a_valid_factorisation_order():
  rng = np.random.default_rng(0)
  target_BL = jnp.asarray(rng.random((16, 12)) < 0.4)
  ranks_BL = np.asarray(permutation.factorisation_ranks(target_BL, jax.random.key(1)))
  perm_BLL = np.asarray(permutation.permutation_mask(jnp.asarray(ranks_BL), target_BL))
  target_BL = np.asarray(target_BL)
  orders_seen = set()
  for b in range(16):
    targets = np.flatnonzero(target_BL[b])
    # Targets take the places 0..T-1 of a permutation; everything else comes first.
    assert sorted(ranks_BL[b, targets]) == list(range(len(targets)))
    assert np.all(ranks_BL[b, ~target_BL[b]] == -1)
    order = targets[np.argsort(ranks_BL[b, targets])]
    orders_seen.add(tuple(order))
    may_see_LL = perm_BLL[b] == 0
    for i in range(12):
      if target_BL[b, i]:
        # The query stream of a target sees exactly the context and the earlier targets.
        earlier = set(order[: ranks_BL[b, i]]) | set(np.flatnonzero(~target_BL[b]))
        assert set(np.flatnonzero(may_see_LL[i])) == earlier
      else:
        assert set(np.flatnonzero(may_see_LL[i])) == set(np.flatnonzero(~target_BL[b]))
  assert len(orders_seen) > 8  # Orders are sampled, not fixed.


def test_perm_mask_hides_the_targets_from_the_query_stream_in_the_model():
  # The model's own mask, checked through its effect: the logits of a target do not depend on
  # that target's token, and do depend on the context.
  task = pretraining.PermutationLmTask(TINY, 16, 4)
  batch = task.random_batch(2, seed=3)
  batch["masked_lm_weights"][0] = 1.0
  batch["input_mask"][0] = 1
  model = task.model(True)
  params = jax.jit(model.init)(
    {"params": jax.random.key(0), "hashing": jax.random.key(1)}, *task.model_inputs(batch)
  )["params"]
  apply = jax.jit(
    lambda b: model.apply(
      {"params": params}, *task.model_inputs(b), rngs={"hashing": jax.random.key(2)}
    )["mlm_logits"]
  )
  base = apply(batch)
  changed = dict(batch, masked_lm_ids=batch["masked_lm_ids"].copy())
  changed["masked_lm_ids"][0, 1] = (changed["masked_lm_ids"][0, 1] + 1) % TINY.vocab_size
  np.testing.assert_array_equal(apply(changed)[0, 1], base[0, 1])
  context = dict(batch, input_ids=batch["input_ids"].copy())
  free = sorted(set(range(16)) - set(batch["masked_lm_positions"][0]))[1]
  context["input_ids"][0, free] = (context["input_ids"][0, free] + 1) % TINY.vocab_size
  assert float(jnp.max(jnp.abs(apply(context)[0, 1] - base[0, 1]))) > 1e-4


def test_permutation_lm_loss_falls_on_the_trainer_step():
  task = pretraining.PermutationLmTask(TINY, 24, 4)
  optimizer = optax.adam(3e-3)
  batch = jax.tree.map(jnp.asarray, task.random_batch(8, seed=0))
  boxed = task.model(True).init(
    {"params": jax.random.key(0), "hashing": jax.random.key(0)}, *task.model_inputs(batch)
  )
  params = nn.unbox(boxed)["params"]
  state = TrainState(step=jnp.int32(0), params=params, opt_state=optimizer.init(params))
  step = jax.jit(
    functools.partial(step_lib.train_step, task=task, optimizer=optimizer, schedule=lambda s: 3e-3)
  )
  losses = []
  for _ in range(25):
    state, sums = step(state, batch, jax.random.key(5))
    losses.append(float(sums["mlm_loss"]) / float(sums["mlm_weight"]))
  assert np.isfinite(losses).all()
  # Each step draws new orders; the loss still falls well below the uniform log(97) = 4.57.
  assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:3]), losses


def test_permutation_settings_that_predict_nothing_are_one_line_errors():
  with pytest.raises(UserInputError, match="needs a sentence head") as error:
    pretraining.make_task(TINY, PretrainingDataConfig(objective="nsp"))
  assert "\n" not in str(error.value)
  # No predicted tail: the data section already refuses it before any model exists.
  with pytest.raises(UserInputError, match="data.mask_prob is 0.0"):
    PretrainingDataConfig(objective="none", mask_prob=0.0)
  with pytest.raises(UserInputError, match="data.max_predictions_per_seq is 0"):
    PretrainingDataConfig(objective="none", max_predictions_per_seq=0)


def test_negative_memory_is_a_one_line_error():
  with pytest.raises(UserInputError, match=r"model.recurrence.mem_len=-1 must be >= 0"):
    with_recurrence(TINY, mem_len=-1)


def test_sharded_permutation_lm_step_equals_single_device():
  # The real trainer step (factorisation orders drawn from the step's rng) on 1 device and on
  # an 8-device data x tensor mesh: same orders, same loss, same update.
  xlnet = {"model.family": "xlnet", "model.attention_kind": "dense", "data.objective": "none"}
  _, params_1, metrics_1, _ = helpers.one_train_step(
    helpers.small_config(**xlnet, **{"mesh.data": 1}), jax.devices()[:1]
  )
  _, params_8, metrics_8, specs = helpers.one_train_step(
    helpers.small_config(**xlnet, **{"mesh.data": 2, "mesh.tensor": 4}), jax.devices()
  )
  assert any(any(axis is not None for axis in spec) for spec in specs), "nothing was sharded"
  for key in ("mlm_loss", "mlm_accuracy", "grad_norm"):
    np.testing.assert_allclose(metrics_8[key], metrics_1[key], rtol=2e-5, err_msg=key)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-4), params_8, params_1
  )


def test_layer_layouts_xlnet_does_not_run_are_one_line_errors():
  for change in (dict(scan_layers=True), dict(reversible=True)):
    with pytest.raises(UserInputError, match="model.family='xlnet' runs its own unscanned"):
      dataclasses.replace(TINY, **change)
