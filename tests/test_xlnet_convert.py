"""tools/convert for XLNet: Hugging Face directory -> workdir -> Hugging Face directory."""

import numpy as np
import pytest

from bert_jax.models.interop import weight_table, xlnet_weights
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
  assert run.model.family == "xlnet" and run.model.mem_len == 8
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
  config = xlnet_weights.model_config_from_xlnet_config(model.config.to_dict(), "c")
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
