"""The transformer_xl family equals transformers' random-init TransfoXLLMHeadModel (PyTorch,
built offline) at four sizes: "projected" has its own vocab, d_embed != d_model (both
projections), clamp_len, same_length, pre-LN and shared r_w/r_r biases; the two adaptive ones
have adaptive input and softmax over clusters [0, 20), [20, 60), [60, 120), [120, 200): div_val 2
(a table and projection per cluster, the softmax tied to the input projections of clusters 1-3
as in transfo-xl-wt103) and div_val 1 (one table, d_embed != d_model, clusters 1 and 3 tied).
Hidden states, new memory, LM log-probs, the training loss and gradients, for a first segment
and a next one; the same loss and gradients on a data 2 x tensor 4 mesh of the 8 fake devices.
Each test runs on the sizes it applies to: the loss on the adaptive ones, the document-memory
rule and the sharded step where the size adds something to what the others check.
"""

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec

from bert_jax.models.interop import weight_table
from bert_jax.models.transformer_xl import hf as transformer_xl_weights
from bert_jax.models.transformer_xl.model import TransformerXLLMHeadModel
from bert_jax.parallel import mesh as mesh_lib
from bert_jax.parallel import sharding
from bert_jax.tasks import causal_lm
from bert_jax.train import setup
from tests import transformer_xl_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

SIZES = {
  "plain": dict(
    vocab_size=96, d_model=32, d_embed=32, n_head=4, d_head=8, d_inner=64, n_layer=2,
    mem_len=6, clamp_len=1000, same_length=False,
  ),
  "projected": dict(
    vocab_size=131, d_model=48, d_embed=24, n_head=3, d_head=16, d_inner=80, n_layer=3,
    mem_len=5, clamp_len=4, same_length=True, untie_r=False, pre_lnorm=True,
  ),
  "adaptive_div2": dict(
    vocab_size=200, d_model=32, d_embed=32, n_head=4, d_head=8, d_inner=48, n_layer=2,
    mem_len=6, cutoffs=[20, 60, 120], div_val=2, tie_projs=[False, True, True, True],
  ),
  "adaptive_div1": dict(
    vocab_size=200, d_model=32, d_embed=16, n_head=4, d_head=8, d_inner=48, n_layer=2,
    mem_len=4, cutoffs=[20, 60, 120], div_val=1, tie_projs=[False, True, False, True],
  ),
}  # fmt: skip
ALL = sorted(SIZES)
ADAPTIVE = ["adaptive_div1", "adaptive_div2"]
# The memory rules are the trunk's, which the adaptive sizes share.
ONE_SOFTMAX = ["plain", "projected"]
# Sizes whose heads split over 4 tensor-parallel devices; adaptive_div2 shards the adaptive
# tables, so adaptive_div1's single table would add nothing.
SHARDABLE = ["adaptive_div2", "plain"]
B, L = 2, 7


@functools.cache
def _pair(size):
  """The reference model of ``size`` and ours, built once per session and shared by the tests."""
  model = transformer_xl_reference.random_transfo_xl(transformers, torch, 1, **SIZES[size])
  state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
  config = transformer_xl_weights.model_config(model.config.to_dict(), "config")
  params = transformer_xl_weights.params_from_hf(state, config)
  return model, state, config, params


@pytest.fixture
def pair(request):
  return _pair(request.param)


def _ids(config, seed):
  return np.random.default_rng(seed).integers(0, config.vocab_size, (B, L)).astype(np.int32)


def _theirs(model, ids, mems=None):
  with transformer_xl_reference.working_forward(torch):
    return model(
      input_ids=torch.from_numpy(ids.astype(np.int64)), mems=mems, output_hidden_states=True
    )


def _ours(config, params, ids, memory):
  mask = jnp.ones_like(ids)
  return TransformerXLLMHeadModel(config).apply({"params": params}, ids, 0 * ids, mask, memory)


def _log_probs(outputs):
  """Our LM's log-probabilities: the adaptive softmax's own, or the softmax of the logits."""
  if "log_probs" in outputs:
    return outputs["log_probs"]
  return jax.nn.log_softmax(outputs["logits"])


def _zero_memory(config):
  # transformers' first segment attends to mem_len zero vectors (its init_mems).
  return [jnp.zeros((B, config.recurrence.mem_len, config.hidden_size))] * config.num_layers


def _assert_memory_equal(ours, theirs):
  for ours_BND, theirs_NBD in zip(ours, theirs, strict=True):
    np.testing.assert_allclose(ours_BND, theirs_NBD.numpy().transpose(1, 0, 2), atol=1e-5)


@pytest.mark.parametrize("pair", ALL, indirect=True)
def test_states_memory_and_log_probs_equal_transformers_over_two_segments(pair):
  model, _, config, params = pair
  run = jax.jit(lambda ids, memory: _ours(config, params, ids, memory))
  ids = _ids(config, 0)
  with torch.no_grad():
    theirs = _theirs(model, ids)
  mine = run(ids, _zero_memory(config))
  np.testing.assert_allclose(mine["content"], theirs.hidden_states[-1].numpy(), atol=1e-5)
  np.testing.assert_allclose(_log_probs(mine), theirs.prediction_scores.numpy(), atol=1e-5)
  _assert_memory_equal(mine["memory"], theirs.mems)
  ids2 = _ids(config, 1)
  with torch.no_grad():
    theirs2 = _theirs(model, ids2, theirs.mems)
  mine2 = run(ids2, mine["memory"])
  np.testing.assert_allclose(_log_probs(mine2), theirs2.prediction_scores.numpy(), atol=1e-5)
  _assert_memory_equal(mine2["memory"], theirs2.mems)
  # The memory matters: the same segment with zero memory predicts otherwise.
  alone = _log_probs(run(ids2, _zero_memory(config)))
  assert np.max(np.abs(np.asarray(alone) - theirs2.prediction_scores.numpy())) > 1e-2


@pytest.mark.parametrize("pair", ADAPTIVE, indirect=True)
def test_training_loss_equals_transformers_losses(pair):
  """The causal-LM objective (adaptive softmax: the target's log-prob) on a second segment."""
  model, _, config, params = pair
  assert config.adaptive.cutoffs  # One softmax: the loss is optax's, of the logits above.
  ids, ids2 = _ids(config, 8), _ids(config, 9)
  with torch.no_grad(), transformer_xl_reference.working_forward(torch):
    memory = model(input_ids=torch.from_numpy(ids.astype(np.int64))).mems
    labels = torch.from_numpy(ids2.astype(np.int64))
    losses = model(input_ids=labels, labels=labels, mems=memory).losses.numpy()  # [B, L - 1]
  task = causal_lm.CausalLmTask(config, L)
  batch = {
    "input_ids": ids2,
    "document_ids": np.ones_like(ids2),
    "labels": np.roll(ids2, -1, axis=1),
    "label_weights": (np.arange(L) < L - 1)[None].repeat(B, 0).astype(np.float32),
  }
  our_memory = [jnp.asarray(m.numpy().transpose(1, 0, 2)) for m in memory]
  outputs = task.model(deterministic=True).apply(
    {"params": params}, *task.model_inputs(batch), memory=our_memory
  )
  loss, sums = task.loss_and_sums(outputs, batch, task.denominators(batch))
  np.testing.assert_allclose(float(loss), losses.mean(), rtol=1e-5)
  assert float(sums["lm_weight"]) == B * (L - 1)


@pytest.mark.parametrize("pair", ALL, indirect=True)
def test_no_memory_equals_transformers_with_mem_len_0(pair):
  """Without memory, same_length (which needs mem_len > 0) off on both sides: the adaptive
  sizes, which inherit transformers' same_length=True, check the adaptive softmax here too."""
  model, _, config, params = pair
  config = dataclasses.replace(
    config, recurrence=dataclasses.replace(config.recurrence, same_length=False)
  )
  model.reset_memory_length(0)
  model.transformer.same_length = False
  try:
    with torch.no_grad():
      theirs = _theirs(model, _ids(config, 2))
  finally:
    model.reset_memory_length(config.recurrence.mem_len)
    model.transformer.same_length = model.config.same_length
  assert theirs.mems is None
  mine = jax.jit(lambda ids: _ours(config, params, ids, None))(_ids(config, 2))
  np.testing.assert_allclose(_log_probs(mine), theirs.prediction_scores.numpy(), atol=1e-5)


@pytest.mark.parametrize("pair", ALL, indirect=True)
def test_gradients_equal_transformers(pair):
  model, _, config, params = pair
  ids, ids2 = _ids(config, 3), _ids(config, 4)
  weights_BLV = np.random.default_rng(5).random((B, L, config.vocab_size)).astype(np.float32)
  with torch.no_grad():
    memory = _theirs(model, ids).mems
  model.zero_grad()
  loss = (_theirs(model, ids2, memory).prediction_scores * torch.from_numpy(weights_BLV)).sum()
  loss.backward()
  our_memory = [jnp.asarray(m.numpy().transpose(1, 0, 2)) for m in memory]
  grads = jax.jit(
    jax.grad(lambda p: jnp.sum(_log_probs(_ours(config, p, ids2, our_memory)) * weights_BLV))
  )(params)
  mine = transformer_xl_weights.hf_from_params(grads, config)
  compared = 0
  for name, parameter in model.named_parameters():
    np.testing.assert_allclose(
      mine[name], parameter.grad.numpy(), rtol=1e-4, atol=2e-5, err_msg=name
    )
    compared += 1
  assert compared == len(weight_table.flatten(params))


@pytest.mark.parametrize("pair", ALL, indirect=True)
def test_round_trip_is_bit_identical_and_parameter_counts_equal(pair):
  model, state, config, params = pair
  exported = transformer_xl_weights.hf_from_params(params, config)
  assert set(exported) == set(state)
  for name, value in exported.items():
    if name != "transformer.pos_emb.inv_freq":  # A buffer transformers recomputes.
      np.testing.assert_array_equal(value, state[name], err_msg=name)
  again = transformer_xl_weights.params_from_hf(exported, config)
  jax.tree.map(
    np.testing.assert_array_equal, weight_table.flatten(again), weight_table.flatten(params)
  )
  back = transformer_xl_weights.config_json(config, "TransfoXLLMHeadModel")
  assert dataclasses.asdict(transformer_xl_weights.model_config(back, "c")) == dataclasses.asdict(
    config
  )
  ours = sum(math.prod(v.shape) for v in weight_table.flatten(params).values())
  assert ours == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("pair", ONE_SOFTMAX, indirect=True)
def test_memory_of_another_document_is_not_seen(pair):
  _, _, config, params = pair
  ids = _ids(config, 6)
  memory = [jax.random.normal(jax.random.key(i), (B, 4, config.hidden_size)) for i in range(3)]
  memory = memory[: config.num_layers]
  model = TransformerXLLMHeadModel(config)
  run = jax.jit(
    lambda docs, memory_docs: model.apply(
      {"params": params}, ids, 0 * ids, docs, memory, memory_ids_BN=memory_docs
    )["logits"]
  )
  document_2 = jnp.full((B, L), 2)
  alone = jax.jit(model.apply)({"params": params}, ids, 0 * ids, document_2)["logits"]
  # Tokens of document 2 ignore the memory of document 1; tokens of document 1 use it.
  np.testing.assert_allclose(run(document_2, jnp.full((B, 4), 1)), alone, atol=1e-5)
  assert float(jnp.max(jnp.abs(run(jnp.full((B, L), 1), jnp.full((B, 4), 1)) - alone))) > 1e-3


@pytest.mark.parametrize("pair", SHARDABLE, indirect=True)
def test_sharded_loss_and_gradients_equal_one_device(pair):
  _, _, config, params = pair
  assert config.num_heads % 4 == 0
  ids = _ids(config, 7)
  memory = [jax.random.normal(jax.random.key(i), (B, 3, config.hidden_size)) for i in range(2)]

  def loss(p, ids_BL, memory):
    out = TransformerXLLMHeadModel(config).apply(
      {"params": p}, ids_BL, 0 * ids_BL, jnp.ones_like(ids_BL), memory
    )
    return jnp.mean(jax.nn.log_softmax(out["logits"])[:, :-1, 0]) + jnp.mean(out["memory"][1])

  single = jax.jit(jax.value_and_grad(loss))(params, ids, memory)
  mesh = mesh_lib.make_mesh(mesh_lib.MeshConfig(data=2, tensor=4), jax.devices())
  rules = mesh_lib.DEFAULT_LOGICAL_AXIS_RULES
  with setup.mesh_context(mesh, rules):
    boxed = jax.eval_shape(
      lambda: TransformerXLLMHeadModel(config).init(jax.random.key(0), ids, ids, ids)["params"]
    )
    shardings = sharding.logical_shardings(boxed, mesh, rules)
    assert any(s.spec != PartitionSpec() for s in jax.tree.leaves(shardings)), "none sharded"
    batch = sharding.batch_sharding(mesh, 2)
    sharded = jax.jit(
      jax.value_and_grad(loss),
      in_shardings=(shardings, batch, [sharding.batch_sharding(mesh, 3)] * 2),
    )(params, ids, memory)
  np.testing.assert_allclose(sharded[0], single[0], rtol=1e-5)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-4), *sharded[1:], *single[1:]
  )
