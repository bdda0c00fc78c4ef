"""bert_jax BERT equals Hugging Face's (Flax) BERT: parameter counts, hidden states, logits."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models import hf_weights
from bert_jax.models.bert import BertEncoder, BertForPreTraining
from bert_jax.models.config import model_config_from_dict

transformers = pytest.importorskip("transformers")


def _param_count(model_dict):
  config = model_config_from_dict(model_dict)
  ids = jnp.zeros((1, 8), jnp.int32)
  shapes = jax.eval_shape(lambda: BertForPreTraining(config).init(
      jax.random.key(0), ids, ids, ids + 1, ids[:, :2]))
  return sum(x.size for x in jax.tree.leaves(shapes))


@pytest.mark.parametrize("size,expected", [("base", 110_106_428), ("large", 336_226_108)])
def test_parameter_count_equals_hugging_face_bert_for_pretraining(size, expected):
  assert _param_count({"size": size}) == expected


def _hf_flax_to_torch_names(flax_params):
  """HF Flax param tree -> the PyTorch/safetensors names and layouts of the same model."""
  state = {}
  for path, value in jax.tree_util.tree_flatten_with_path(flax_params)[0]:
    keys = [k.key for k in path]
    leaf = keys[-1]
    value = np.asarray(value)
    if leaf == "kernel":
      leaf, value = "weight", value.T
    elif leaf in ("embedding", "scale"):
      leaf = "weight"
    state[".".join(keys[:-1] + [leaf])] = value
  return state


@pytest.fixture(scope="module")
def hf_model_and_config():
  hf_config = transformers.BertConfig(
      vocab_size=211, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
      intermediate_size=96, max_position_embeddings=40, hidden_act="gelu")
  with jax.numpy_rank_promotion("allow"):  # Hugging Face's code relies on implicit promotion.
    hf_model = transformers.FlaxBertForPreTraining(hf_config, seed=3)
  ours = model_config_from_dict(dict(
      vocab_size=211, hidden_size=64, num_layers=3, num_heads=4, intermediate_size=96,
      max_position_embeddings=40))
  return hf_model, ours


def _inputs():
  rng = np.random.default_rng(0)
  input_ids = rng.integers(0, 211, size=(3, 17)).astype(np.int32)
  token_types = (np.arange(17)[None, :] > 8).astype(np.int32).repeat(3, 0)
  mask = np.ones((3, 17), np.int32)
  mask[1, 11:] = 0  # Padding in two rows, of different lengths.
  mask[2, 5:] = 0
  return input_ids, token_types, mask


def test_hidden_states_and_logits_equal_hugging_face(hf_model_and_config):
  hf_model, config = hf_model_and_config
  params = hf_weights.params_from_hf(_hf_flax_to_torch_names(hf_model.params), config)
  input_ids, token_types, mask = _inputs()
  with jax.numpy_rank_promotion("allow"):
    hf_out = hf_model(input_ids, attention_mask=mask, token_type_ids=token_types,
                      output_hidden_states=True)
  hidden, pooled = BertEncoder(config).apply({"params": params["bert"]}, input_ids, token_types,
                                             mask)
  ours = BertForPreTraining(config).apply({"params": params}, input_ids, token_types, mask)
  real = mask.astype(bool)  # Padded positions are not compared: neither model defines them.
  np.testing.assert_allclose(np.asarray(hidden)[real], np.asarray(hf_out.hidden_states[-1])[real],
                             atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(ours["mlm_logits"])[real],
                             np.asarray(hf_out.prediction_logits)[real], atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(ours["nsp_logits"], hf_out.seq_relationship_logits, atol=1e-5,
                             rtol=1e-5)
  positions = np.array([[1, 4], [0, 10], [2, 3]], np.int32)
  gathered = BertForPreTraining(config).apply({"params": params}, input_ids, token_types, mask,
                                              positions)["mlm_logits"]
  np.testing.assert_allclose(gathered, np.take_along_axis(
      np.asarray(ours["mlm_logits"]), positions[:, :, None], axis=1), atol=1e-6)


def test_hf_weights_round_trip_exactly(hf_model_and_config):
  hf_model, config = hf_model_and_config
  state = _hf_flax_to_torch_names(hf_model.params)
  back = hf_weights.hf_from_params(hf_weights.params_from_hf(state, config), config)
  for name, value in state.items():
    np.testing.assert_array_equal(back[name], value, err_msg=name)


def test_missing_tensors_are_reported(hf_model_and_config):
  hf_model, config = hf_model_and_config
  state = _hf_flax_to_torch_names(hf_model.params)
  del state["bert.encoder.layer.1.output.dense.weight"]
  with pytest.raises(ValueError, match="lack 1 tensors.*layer.1.output.dense"):
    hf_weights.params_from_hf(state, config)
