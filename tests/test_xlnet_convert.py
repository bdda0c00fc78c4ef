"""tools/convert for XLNet: Hugging Face directory -> workdir -> Hugging Face directory."""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models.families import model_config_from_dict
from bert_jax.models.interop import weight_table
from bert_jax.models.xlnet import hf as xlnet_weights
from bert_jax.models.xlnet.model import XLNetEncoder
from bert_jax.tools import convert, workdir_params
from tests import xlnet_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

SIZE = dict(vocab_size=67, d_model=32, n_layer=2, n_head=4, d_inner=40, mem_len=8)


def _state(model):
  return {k: v.detach().numpy() for k, v in model.state_dict().items()}


def test_hf_round_trip_through_a_workdir_is_bit_identical(tmp_path):
  model = xlnet_reference.random_xlnet(transformers, torch, 4, **SIZE)
  hf_dir, workdir, back = tmp_path / "hf", tmp_path / "workdir", tmp_path / "back"
  model.save_pretrained(hf_dir)
  assert convert.main(["convert", "--from=hf", f"--input={hf_dir}", f"--output={workdir}"]) == 0
  run = workdir_params.read_run(str(workdir))
  assert run.model.family == "xlnet" and run.model.recurrence.mem_len == 8
  assert convert.main(["convert", "--to=hf", f"--input={workdir}", f"--output={back}"]) == 0
  exported = safetensors_numpy.load_file(str(back / "model.safetensors"))
  original = _state(model)
  assert set(exported) == set(original) - {"lm_loss.weight"}
  for name, value in exported.items():
    np.testing.assert_array_equal(value, original[name], err_msg=name)
  reloaded = transformers.XLNetLMHeadModel.from_pretrained(back).eval()
  ids = torch.from_numpy(np.random.default_rng(0).integers(0, 67, (2, 7)))
  with torch.no_grad():
    np.testing.assert_array_equal(reloaded(ids).logits.numpy(), model(ids).logits.numpy())


def test_xlnet_model_checkpoint_converts_to_the_trunk(tmp_path):
  model = xlnet_reference.random_xlnet(transformers, torch, 5, kind="model", **SIZE)
  hf_dir, workdir = tmp_path / "hf", tmp_path / "workdir"
  model.save_pretrained(hf_dir)
  assert convert.main(["convert", "--from=hf", f"--input={hf_dir}", f"--output={workdir}"]) == 0
  params = weight_table.flatten(workdir_params.read_run(str(workdir)).params)
  assert "lm_loss_bias" not in params
  state = _state(model)
  config = xlnet_weights.model_config(model.config.to_dict(), "c")
  for row in xlnet_weights.rows(config):
    if row.group == "encoder":
      theirs = state[row.theirs.removeprefix("transformer.")]
      np.testing.assert_array_equal(
        weight_table.to_theirs(row, np.asarray(params[row.ours])), theirs
      )


@pytest.mark.parametrize(
  "change, message",
  [
    (dict(same_length=True), "same_length=True"),
    (dict(bi_data=True), "bi_data=True"),
    (dict(ff_activation="relu"), "ff_activation='relu'"),
  ],
)
def test_settings_bert_jax_does_not_compute_are_one_line_errors(change, message, tmp_path, capsys):
  model = xlnet_reference.random_xlnet(transformers, torch, 6, **dict(SIZE, **change))
  model.save_pretrained(tmp_path / "hf")
  status = convert.main(
    ["convert", "--from=hf", f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'w'}"]
  )
  assert status == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and message in err[0], err


def test_xlnet_base_has_the_transformers_parameter_count():
  # Large (L=24, H=1024, A=16) gives 360,268,800 on both sides the same way (measured once;
  # tracing it here would double this test's cost).
  config = model_config_from_dict(dict(family="xlnet", size="base", vocab_size=32000))
  ids = jnp.zeros((1, 2), jnp.int32)
  shapes = jax.eval_shape(lambda: XLNetEncoder(config).init(jax.random.key(0), ids, ids, ids + 1))
  flat = weight_table.flatten(nn.unbox(shapes)["params"])
  trunk = sum(
    math.prod(leaf.shape) for path, leaf in flat.items() if not path.startswith("pooler/")
  )
  with torch.device("meta"):  # Shapes only: no 117M-parameter init.
    reference = transformers.XLNetModel(
      transformers.XLNetConfig(vocab_size=32000, d_model=768, n_layer=12, n_head=12, d_inner=3072)
    )
  assert trunk == sum(p.numel() for p in reference.parameters()) == 116_718_336
