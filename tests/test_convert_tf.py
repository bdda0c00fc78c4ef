"""tools/convert --from=tf: a checkpoint TensorFlow writes with the original BERT's names."""

import json

import numpy as np
import pytest

from bert_jax.models.bert import hf as bert_hf
from bert_jax.models.interop import weight_table
from bert_jax.tools import convert, workdir_params
from tests import hf_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

SIZE = {
  "vocab_size": 101,
  "hidden_size": 32,
  "num_hidden_layers": 2,
  "num_attention_heads": 4,
  "intermediate_size": 48,
  "max_position_embeddings": 20,
}


def _tf_variables(state):
  """The original TF BERT's variables for a Hugging Face state dict.

  Written from the naming rules of google-research/bert (dots become slashes, ``layer.<i>``
  becomes ``layer_<i>``, LayerNorm weight/bias are gamma/beta, Dense weights are kernels stored
  [in, out], embedding tables have no suffix, the output biases and NSP matrix have their own
  names) rather than from bert_jax's table, so the test checks that table independently.
  """
  renamed = {
    "cls.predictions.bias": "cls/predictions/output_bias",
    "cls.seq_relationship.weight": "cls/seq_relationship/output_weights",
    "cls.seq_relationship.bias": "cls/seq_relationship/output_bias",
  }
  variables = {}
  for name, value in state.items():
    if name.startswith("cls.predictions.decoder"):
      continue  # Tied to the word table and the output bias; TF keeps one copy of each.
    if name in renamed:
      variables[renamed[name]] = value  # output_weights is [2, hidden], as in PyTorch.
      continue
    path = name.replace(".layer.", ".layer_").replace(".", "/")
    if "LayerNorm" in path:
      path = path.replace("/weight", "/gamma").replace("/bias", "/beta")
    elif "embeddings" in path:
      path = path.removesuffix("/weight")
    elif path.endswith("/weight"):
      path, value = path.removesuffix("/weight") + "/kernel", value.T
    variables[path] = value
  return variables


def _write_tf_checkpoint(tf, prefix, variables):
  """Saves with tf.compat.v1's Saver, as the original BERT did: names are kept exactly."""
  tf_variables = {name: tf.Variable(value) for name, value in variables.items()}
  tf.compat.v1.train.Saver(var_list=tf_variables).save(None, str(prefix), write_meta_graph=False)


def test_tf_checkpoint_converts_to_the_same_params_as_hugging_face(tmp_path, capsys):
  tf = pytest.importorskip("tensorflow")
  model = hf_reference.random_bert(transformers, torch, seed=7, **SIZE)
  state = {name: tensor.numpy() for name, tensor in model.state_dict().items()}
  variables = _tf_variables(state)
  # What a pretraining checkpoint also holds: Adam slots and the step counter.
  rng = np.random.default_rng(0)
  for name in ("bert/embeddings/word_embeddings", "cls/predictions/output_bias"):
    for slot in ("adam_m", "adam_v"):
      variables[f"{name}/{slot}"] = rng.normal(size=variables[name].shape).astype(np.float32)
  variables["global_step"] = np.int64(1000)
  checkpoint_dir = tmp_path / "uncased_L-2_H-32_A-4"
  checkpoint_dir.mkdir()
  _write_tf_checkpoint(tf, checkpoint_dir / "bert_model.ckpt", variables)
  bert_config = {
    k: v
    for k, v in model.config.to_dict().items()
    if k
    in (
      *SIZE,
      "hidden_act",
      "type_vocab_size",
      "initializer_range",
      "hidden_dropout_prob",
      "attention_probs_dropout_prob",
    )
  }
  (checkpoint_dir / "bert_config.json").write_text(json.dumps(bert_config))
  (checkpoint_dir / "vocab.txt").write_text("".join(f"t{i}\n" for i in range(101)))

  assert (
    convert.main(
      [
        "convert",
        "--from=tf",
        f"--input={checkpoint_dir}/bert_model.ckpt",
        f"--bert_config={checkpoint_dir}/bert_config.json",
        f"--output={tmp_path / 'workdir'}",
      ]
    )
    == 0
  )
  run = workdir_params.read_run(str(tmp_path / "workdir"))
  model_fields = (
    run.model.vocab_size,
    run.model.hidden_size,
    run.model.num_layers,
    run.model.num_heads,
    run.model.intermediate_size,
    run.model.max_position_embeddings,
  )
  assert model_fields == (101, 32, 2, 4, 48, 20)
  # Stored relative to the workdir (workdirs can move), read back as its vocab.txt.
  assert workdir_params.run_vocab(run)[0] == str(tmp_path / "workdir" / "vocab.txt")
  expected = bert_hf.params_from_hf(state, run.model)
  flat_ours, flat_expected = weight_table.flatten(run.params), weight_table.flatten(expected)
  assert flat_ours.keys() == flat_expected.keys()
  for name, value in flat_expected.items():
    np.testing.assert_array_equal(flat_ours[name], value, err_msg=name)

  # A variable missing and one of another shape: one line naming both, nothing written.
  del variables["bert/pooler/dense/bias"]
  variables["bert/encoder/layer_1/output/dense/kernel"] = np.zeros((48, 31), np.float32)
  broken = tmp_path / "broken"
  broken.mkdir()
  _write_tf_checkpoint(tf, broken / "bert_model.ckpt", variables)
  capsys.readouterr()
  assert (
    convert.main(
      [
        "convert",
        "--from=tf",
        f"--input={broken}/bert_model.ckpt",
        f"--bert_config={checkpoint_dir}/bert_config.json",
        f"--output={tmp_path / 'out'}",
      ]
    )
    == 2
  )
  errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
  assert len(errors) == 1, errors
  assert "tensors 1 missing (bert/pooler/dense/bias)" in errors[0]
  assert "bert/encoder/layer_1/output/dense/kernel (48, 31), config: (48, 32)" in errors[0]
  assert not (tmp_path / "out").exists()
