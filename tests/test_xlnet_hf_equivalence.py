"""The xlnet family equals transformers' random-init XLNetLMHeadModel (PyTorch, built offline):
two sizes, with and without memory, with padding, with a permutation mask and target mapping.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models.interop import weight_table
from bert_jax.models.xlnet import hf as xlnet_weights
from bert_jax.models.xlnet.model import XLNetLMHeadModel
from tests import xlnet_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

SIZES = {
  "small": dict(vocab_size=61, d_model=32, n_layer=2, n_head=2, d_inner=48),
  "wider": dict(vocab_size=53, d_model=48, n_layer=3, n_head=4, d_inner=80),
}
B, L, MEM_LEN = 3, 9, 6


@pytest.fixture(scope="module", params=sorted(SIZES))
def pair(request):
  model = xlnet_reference.random_xlnet(
    transformers, torch, 1, mem_len=MEM_LEN, **SIZES[request.param]
  )
  state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
  config = xlnet_weights.model_config(model.config.to_dict(), "config")
  params = xlnet_weights.params_from_hf(state, config)
  return model, state, config, params


def _inputs(vocab, seed):
  rng = np.random.default_rng(seed)
  ids = rng.integers(0, vocab, (B, L)).astype(np.int32)
  types = (np.arange(L)[None, :] >= rng.integers(2, L, (B, 1))).astype(np.int32)
  mask = np.ones((B, L), np.int32)
  mask[1, -3:] = 0
  return ids, types, mask


def _torch(model, ids, types, mask, **kwargs):
  extra = {k: (v if isinstance(v, list) else torch.from_numpy(v)) for k, v in kwargs.items()}
  with torch.no_grad():
    out = model(
      input_ids=torch.from_numpy(ids.astype(np.int64)),
      token_type_ids=torch.from_numpy(types.astype(np.int64)),
      # None for transformers' attn_type="uni", whose in-place mask sum fails for batches > 1.
      attention_mask=None if mask is None else torch.from_numpy(mask.astype(np.float32)),
      output_hidden_states=True,
      use_mems=True,
      **extra,
    )
  return out


def test_outputs_and_memory_equal_transformers(pair):
  model, _, config, params = pair
  ours = jax.jit(lambda p, *a: XLNetLMHeadModel(config).apply({"params": p}, *a))
  ids, types, mask = _inputs(config.vocab_size, 0)
  theirs = _torch(model, ids, types, mask)
  mine = ours(params, ids, types, mask, None)
  np.testing.assert_allclose(mine["content"], theirs.hidden_states[-1].numpy(), atol=1e-5)
  np.testing.assert_allclose(mine["logits"], theirs.logits.numpy(), atol=1e-5)
  # The next segment attends to the memory of the first (the last MEM_LEN layer inputs).
  for ours_mem, their_mem in zip(mine["memory"], theirs.mems):
    assert ours_mem.shape == (B, MEM_LEN, config.hidden_size)
    np.testing.assert_allclose(ours_mem, their_mem.numpy().transpose(1, 0, 2), atol=1e-5)
  ids2, types2, mask2 = _inputs(config.vocab_size, 1)
  theirs2 = _torch(model, ids2, types2, mask2, mems=list(theirs.mems))
  mine2 = ours(params, ids2, types2, mask2, mine["memory"])
  np.testing.assert_allclose(mine2["logits"], theirs2.logits.numpy(), atol=1e-5)
  # Memory matters: without it the second segment's logits differ.
  assert (
    np.max(
      np.abs(np.asarray(ours(params, ids2, types2, mask2, None)["logits"]) - theirs2.logits.numpy())
    )
    > 1e-2
  )


def test_two_stream_logits_equal_transformers_with_perm_mask_and_memory(pair):
  model, _, config, params = pair
  ids, types, mask = _inputs(config.vocab_size, 2)
  perm_mask, mapping = xlnet_reference.permutation(np.random.default_rng(3), B, L, num_predict=4)
  first = _torch(model, ids, types, mask)
  theirs = _torch(
    model, ids, types, mask, perm_mask=perm_mask, target_mapping=mapping, mems=list(first.mems)
  )
  memory = [jnp.asarray(m.numpy().transpose(1, 0, 2)) for m in first.mems]
  mine = jax.jit(XLNetLMHeadModel(config).apply)(
    {"params": params}, ids, types, mask, memory, perm_mask, mapping
  )
  assert mine["logits"].shape == (B, 4, config.vocab_size)
  np.testing.assert_allclose(mine["logits"], theirs.logits.numpy(), atol=1e-5)


def test_query_stream_never_sees_its_own_token(pair):
  _, _, config, params = pair
  ids, types, mask = _inputs(config.vocab_size, 4)
  mask[:] = 1
  perm_mask, mapping = xlnet_reference.permutation(np.random.default_rng(5), B, L, num_predict=3)
  target = int(np.argmax(mapping[0, 0]))
  changed = ids.copy()
  changed[0, target] = (ids[0, target] + 1) % config.vocab_size
  run = jax.jit(
    lambda x: XLNetLMHeadModel(config).apply(
      {"params": params}, x, types, mask, None, perm_mask, mapping
    )
  )
  before, after = run(ids), run(changed)
  np.testing.assert_array_equal(
    np.asarray(before["logits"][0, 0]), np.asarray(after["logits"][0, 0])
  )
  # The content stream at the target does see its token.
  assert float(jnp.max(jnp.abs(before["content"][0, target] - after["content"][0, target]))) > 1e-3


def test_round_trip_is_bit_identical(pair):
  _, state, config, params = pair
  exported = xlnet_weights.hf_from_params(params, config)
  assert set(exported) == set(state) - {"lm_loss.weight"}
  for name, value in exported.items():
    np.testing.assert_array_equal(value, state[name], err_msg=name)
  again = xlnet_weights.params_from_hf(exported, config)
  jax.tree.map(
    np.testing.assert_array_equal, weight_table.flatten(again), weight_table.flatten(params)
  )
  back = xlnet_weights.config_json(config, "XLNetLMHeadModel")
  assert dataclasses.asdict(xlnet_weights.model_config(back, "c")) == dataclasses.asdict(config)


def test_causal_transformer_xl_lm_with_memory_equals_transformers():
  # transformers' attn_type="uni" is model.causal: the Transformer-XL LM over [memory; segment].
  model = xlnet_reference.random_xlnet(
    transformers, torch, 2, mem_len=MEM_LEN, attn_type="uni", **SIZES["small"]
  )
  state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
  config = xlnet_weights.model_config(model.config.to_dict(), "config")
  assert config.causal
  params = xlnet_weights.params_from_hf(state, config)
  ours = jax.jit(lambda *a: XLNetLMHeadModel(config).apply({"params": params}, *a))
  ids, types, mask = _inputs(config.vocab_size, 6)
  mask[:] = 1
  types[:] = 0
  first = _torch(model, ids, types, None)
  mine = ours(ids, types, mask, None)
  np.testing.assert_allclose(mine["logits"], first.logits.numpy(), atol=1e-5)
  ids2 = (ids + 1) % config.vocab_size
  second = _torch(model, ids2, types, None, mems=list(first.mems))
  np.testing.assert_allclose(
    ours(ids2, types, mask, mine["memory"])["logits"], second.logits.numpy(), atol=1e-5
  )
  # Causal: changing the last token leaves every earlier position's logits as they were.
  changed = ids2.copy()
  changed[:, -1] = (changed[:, -1] + 1) % config.vocab_size
  moved = ours(changed, types, mask, mine["memory"])["logits"]
  np.testing.assert_array_equal(
    moved[:, :-1], ours(ids2, types, mask, mine["memory"])["logits"][:, :-1]
  )
