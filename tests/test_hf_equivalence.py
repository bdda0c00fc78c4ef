"""bert_jax BERT equals Hugging Face's: parameter counts, the weight table, predicted positions.

The end-to-end equivalence (hidden states and logits of converted random-init models of two
sizes and vocabs, and the export back) is tests/test_convert.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.bert import hf as bert_hf
from bert_jax.models.bert.model import BertForPreTraining
from bert_jax.models.families import model_config_from_dict
from tests import hf_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")


def _param_count(model_dict):
  config = model_config_from_dict(model_dict)
  ids = jnp.zeros((1, 8), jnp.int32)
  shapes = jax.eval_shape(
    lambda: BertForPreTraining(config).init(jax.random.key(0), ids, ids, ids + 1, ids[:, :2])
  )
  return sum(x.size for x in jax.tree.leaves(shapes))


@pytest.mark.parametrize("size,expected", [("base", 110_106_428), ("large", 336_226_108)])
def test_parameter_count_equals_hugging_face_bert_for_pretraining(size, expected):
  assert _param_count({"size": size}) == expected


SIZE = {
  "vocab_size": 53,
  "hidden_size": 24,
  "num_hidden_layers": 2,
  "num_attention_heads": 3,
  "intermediate_size": 40,
  "max_position_embeddings": 16,
}


@pytest.fixture(scope="module")
def state_and_config():
  model = hf_reference.random_bert(transformers, torch, seed=5, **SIZE)
  state = {name: tensor.numpy() for name, tensor in model.state_dict().items()}
  config = model_config_from_dict(
    {
      "vocab_size": 53,
      "hidden_size": 24,
      "num_layers": 2,
      "num_heads": 3,
      "intermediate_size": 40,
      "max_position_embeddings": 16,
    }
  )
  return state, config


def test_legacy_names_and_buffers_convert_like_current_ones(state_and_config):
  state, config = state_and_config
  legacy = {
    name.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
      "LayerNorm.bias", "LayerNorm.beta"
    ): value
    for name, value in state.items()
  }
  legacy["bert.embeddings.position_ids"] = np.arange(16)[None]  # Saved by old transformers.
  current = jax.tree_util.tree_leaves_with_path(bert_hf.params_from_hf(state, config))
  converted = jax.tree_util.tree_leaves_with_path(bert_hf.params_from_hf(legacy, config))
  assert [path for path, _ in current] == [path for path, _ in converted]
  for (path, ours), (_, theirs) in zip(current, converted):
    np.testing.assert_array_equal(ours, theirs, err_msg=jax.tree_util.keystr(path))


def test_untied_decoder_is_refused(state_and_config):
  state, config = state_and_config
  untied = dict(state)
  untied["cls.predictions.decoder.weight"] = state["cls.predictions.decoder.weight"] + 1
  with pytest.raises(UserInputError, match="decoder.weight differs from bert.embeddings"):
    bert_hf.params_from_hf(untied, config)


def test_gathered_positions_equal_the_full_logits(state_and_config):
  state, config = state_and_config
  params = bert_hf.params_from_hf(state, config)
  input_ids, token_types, mask = hf_reference.random_inputs(53, length=9)
  apply = jax.jit(BertForPreTraining(config).apply)
  full = apply({"params": params}, input_ids, token_types, mask)["mlm_logits"]
  positions = np.array([[1, 4], [0, 8], [2, 3]], np.int32)
  gathered = apply({"params": params}, input_ids, token_types, mask, positions)["mlm_logits"]
  np.testing.assert_allclose(
    gathered, np.take_along_axis(np.asarray(full), positions[:, :, None], axis=1), atol=1e-6
  )


@pytest.mark.parametrize("part,expected", [("encoder", 66_362_880), ("pretraining", 66_985_530)])
def test_distilbert_parameter_counts_equal_hugging_face(part, expected):
  """DistilBertModel / DistilBertForMaskedLM of the default DistilBertConfig (6 x 768)."""
  config = model_config_from_dict({"family": "distilbert", "size": "base", "num_layers": 6})
  ids = jnp.zeros((1, 8), jnp.int32)
  shapes = jax.eval_shape(
    lambda: (
      families.get("distilbert")
      .pretraining_model(config)
      .init(jax.random.key(0), ids, ids, ids + 1, ids[:, :2])
    )
  )["params"]
  tree = shapes["bert"] if part == "encoder" else shapes
  assert "token_type_embeddings" not in shapes["bert"]["embeddings"]
  assert sum(x.size for x in jax.tree.leaves(tree)) == expected
