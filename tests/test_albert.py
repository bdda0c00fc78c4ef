"""ALBERT's layer sharing and SpanBERT's boundary head: one layer stored once, scan / remat /
8-device meshes give the same numbers, boundaries are the only outputs the SBO head reads."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.errors import UserInputError
from bert_jax.models import span_boundary
from bert_jax.models.albert.model import AlbertForPreTraining
from bert_jax.models.bert.model import BertForPreTraining
from bert_jax.models.families import model_config_from_dict
from bert_jax.parallel import sharding
from bert_jax.tasks.pretraining import PretrainingTask
from tests import helpers

_MODEL = {
  "family": "albert",
  "size": "tiny",
  "num_layers": 3,
  "embedding_size": 32,
  "vocab_size": 300,
  "max_position_embeddings": 32,
  "span_boundary": {"enabled": True},
}


def _task(**overrides):
  return PretrainingTask(model_config_from_dict(dict(_MODEL, **overrides)), 32, 6)


def _loss_and_grads(task, params, batch):
  def loss(p):
    outputs = AlbertForPreTraining(task.model_config).apply(
      {"params": p}, *task.model_inputs(batch)
    )
    return task.loss_and_sums(outputs, batch, task.denominators(batch))[0]

  return jax.jit(jax.value_and_grad(loss))(params)


@pytest.fixture(scope="module")
def reference():
  task = _task()
  batch = {k: jnp.asarray(v) for k, v in task.random_batch(4).items()}
  init = jax.jit(AlbertForPreTraining(task.model_config).init)  # Not op by op.
  params = sharding.strip_boxes(init(jax.random.key(0), *task.model_inputs(batch))["params"])
  return params, batch, _loss_and_grads(task, params, batch)


def test_all_sharing_stores_one_layer(reference):
  params, _, (loss, grads) = reference
  assert list(params["bert"]["encoder"]) == ["shared"]
  assert sorted(params) == ["bert", "mlm_head", "sbo_head", "sop_head"]
  assert np.isfinite(loss)
  # The shared layer's gradient collects all three applications: none of them is zero.
  assert all(np.any(g != 0) for g in jax.tree.leaves(grads["bert"]["encoder"]))


@pytest.mark.parametrize(
  "overrides",
  [{"scan_layers": True}, {"remat_policy": "full"}, {"scan_layers": True, "remat_policy": "dots"}],
  ids=["scan", "remat", "scan_remat"],
)
def test_scan_and_remat_change_nothing(reference, overrides):
  params, batch, (loss, grads) = reference
  other_loss, other_grads = _loss_and_grads(_task(**overrides), params, batch)  # Same tree.
  np.testing.assert_allclose(other_loss, loss, rtol=1e-6)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), other_grads, grads
  )


@pytest.mark.parametrize("sharing,shared", [("attention", "attention"), ("ffn", "ffn")])
def test_partial_sharing_stores_one_sublayer(sharing, shared):
  task = _task(albert={"layer_sharing": sharing})
  batch = task.random_batch(2)
  model = AlbertForPreTraining(task.model_config)
  # The parameter tree's structure, without computing an init.
  params = jax.eval_shape(lambda: model.init(jax.random.key(0), *task.model_inputs(batch)))
  encoder = params["params"]["bert"]["encoder"]
  other = "ffn" if shared == "attention" else "attention"
  assert sorted(encoder) == sorted([shared] + [f"{other}_{i}" for i in range(3)])


@pytest.mark.parametrize(
  "overrides,message",
  [
    ({"albert": {"layer_sharing": "half"}}, "model.albert.layer_sharing='half' is unknown"),
    (
      {"albert": {"layer_sharing": "ffn"}, "scan_layers": True},
      "scan_layers=True with model.albert.layer_sharing",
    ),
    ({"reversible": True}, "model.reversible=True needs model.albert.layer_sharing='none'"),
    ({"hidden_act": "relu"}, "model.hidden_act='relu' is unknown"),
  ],
)
def test_bad_albert_options_are_one_line(overrides, message):
  with pytest.raises(UserInputError, match=message.replace("(", r"\(")):
    model_config_from_dict(dict(_MODEL, **overrides))


def test_span_boundaries_of_runs_of_masked_positions():
  positions = jnp.array([[2, 3, 4, 7, 9, 10, 0, 0]])  # Spans 2-4, 7, 9-10; then padding.
  left, right, offset = span_boundary.span_boundaries(positions, length=11)
  np.testing.assert_array_equal(left[0, :6], [1, 1, 1, 6, 8, 8])
  np.testing.assert_array_equal(right[0, :6], [5, 5, 5, 8, 10, 10])  # 10 + 1 clipped to L - 1.
  np.testing.assert_array_equal(offset[0, :6], [0, 1, 2, 0, 0, 1])


def test_any_family_takes_the_boundary_head():
  # BERT's tables are as wide as its hidden size (embedding_size 0).
  config = model_config_from_dict(dict(_MODEL, family="bert", embedding_size=0))
  task = PretrainingTask(config, 32, 6)
  batch = task.random_batch(2)
  model = BertForPreTraining(config)
  variables = jax.eval_shape(lambda: model.init(jax.random.key(0), *task.model_inputs(batch)))
  assert "sbo_head" in variables["params"]
  outputs = jax.eval_shape(model.apply, variables, *task.model_inputs(batch))
  assert outputs["sbo_logits"].shape == (2, 6, 300)
  assert outputs["sbo_logits"].dtype == jnp.float32


def test_boundary_head_reads_only_the_boundaries():
  config = model_config_from_dict(dict(_MODEL))
  head = span_boundary.SpanBoundaryHead(config, config.embedding_size)
  x = jax.random.normal(jax.random.key(1), (1, 12, config.hidden_size))
  table = jax.random.normal(jax.random.key(2), (config.vocab_size, config.embedding_size))
  attend = lambda h: jnp.einsum("bpe,ve->bpv", h, table)
  positions = jnp.array([[3, 4, 5, 9]])  # Span 3-5 (boundaries 2, 6) and 9 (8, 10).
  params = head.init(jax.random.key(0), x, positions, attend)
  logits = head.apply(params, x, positions, attend)
  inner = x.at[:, jnp.array([3, 4, 5, 9, 0, 11])].add(5.0)  # Masked tokens and far positions.
  np.testing.assert_array_equal(head.apply(params, inner, positions, attend), logits)
  boundary = x.at[:, 6].add(5.0)  # The right boundary of the first span only.
  changed = np.abs(np.asarray(head.apply(params, boundary, positions, attend) - logits)).max(-1)
  assert np.all(changed[0, :3] > 1e-3) and changed[0, 3] == 0


@pytest.fixture(scope="module")
def single_device_step():
  return helpers.one_train_step(_albert_config(**{"mesh.data": 1}), jax.devices()[:1])


def _albert_config(**overrides):
  return helpers.small_config(
    **{
      "model.family": "albert",
      "model.embedding_size": 64,
      "model.albert.layer_sharing": "all",
      "model.span_boundary.enabled": True,
      "data.objective": "sop",
      **overrides,
    }
  )


@pytest.mark.parametrize(
  "axes",
  [{"mesh.data": 8}, {"mesh.data": 1, "mesh.fsdp": 8}, {"mesh.data": 2, "mesh.tensor": 4}],
  ids=["data8", "fsdp8", "data2xtensor4"],
)
def test_sharded_step_equals_single_device(single_device_step, axes):
  init_1, params_1, metrics_1, _ = single_device_step
  init_8, params_8, metrics_8, specs = helpers.one_train_step(_albert_config(**axes), jax.devices())
  if axes.get("mesh.fsdp", 1) > 1 or axes.get("mesh.tensor", 1) > 1:
    assert any(any(axis is not None for axis in spec) for spec in specs), "nothing was sharded"
  assert list(params_1["bert"]["encoder"]) == ["shared"]
  jax.tree.map(np.testing.assert_array_equal, init_1, init_8)
  for key in ("mlm_loss", "sop_loss", "sbo_loss", "mlm_accuracy", "grad_norm"):
    np.testing.assert_allclose(metrics_8[key], metrics_1[key], rtol=2e-5, err_msg=key)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-4), params_8, params_1
  )
