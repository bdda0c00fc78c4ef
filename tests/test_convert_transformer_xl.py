"""tools/convert for Transformer-XL: Hugging Face directory -> workdir -> Hugging Face directory."""

import numpy as np
import pytest

from bert_jax.models.interop import weight_table
from bert_jax.models.transformer_xl import hf as transformer_xl_weights
from bert_jax.tools import convert, workdir_params
from tests import transformer_xl_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

SIZE = dict(
  vocab_size=57, d_model=32, d_embed=16, n_head=4, d_head=8, d_inner=40, n_layer=2, mem_len=5
)


def _convert(*args):
  return convert.main(["convert", *[str(a) for a in args]])


def _log_probs(model, ids, mems=None):
  with torch.no_grad(), transformer_xl_reference.working_forward(torch):
    return model(input_ids=torch.from_numpy(ids), mems=mems)


@pytest.mark.parametrize("safe", [True, False], ids=["safetensors", "bin"])
def test_lm_round_trip_loads_in_transformers_with_nothing_missing(safe, tmp_path):
  # transformers cannot save the shared biases of untie_r=False as safetensors, only as .bin;
  # bert_jax's export writes every copy, which loads either way.
  model = transformer_xl_reference.random_transfo_xl(transformers, torch, 3, untie_r=safe, **SIZE)
  hf_dir, workdir, back = tmp_path / "hf", tmp_path / "workdir", tmp_path / "back"
  model.save_pretrained(hf_dir, safe_serialization=safe)
  assert _convert("--from=hf", f"--input={hf_dir}", f"--output={workdir}") == 0
  run = workdir_params.read_run(str(workdir))
  assert (run.model.family, run.model.recurrence.mem_len, run.model.embedding_size) == (
    "transformer_xl",
    5,
    16,
  )
  assert _convert("--to=hf", f"--input={workdir}", f"--output={back}") == 0
  reloaded, info = transformers.TransfoXLLMHeadModel.from_pretrained(back, output_loading_info=True)
  assert not info["missing_keys"] and not info["unexpected_keys"], info
  reloaded.eval()
  original = {k: v.numpy() for k, v in model.state_dict().items()}
  for name, value in reloaded.state_dict().items():
    np.testing.assert_array_equal(value.numpy(), original[name], err_msg=name)
  ids = np.random.default_rng(0).integers(0, 57, (2, 6))
  first, again = _log_probs(model, ids), _log_probs(reloaded, ids)
  np.testing.assert_array_equal(again.prediction_scores.numpy(), first.prediction_scores.numpy())


def test_transfo_xl_model_checkpoint_converts_to_the_trunk(tmp_path):
  model = transformer_xl_reference.random_transfo_xl(transformers, torch, 4, kind="model", **SIZE)
  hf_dir, workdir, back = tmp_path / "hf", tmp_path / "workdir", tmp_path / "back"
  model.save_pretrained(hf_dir)
  assert _convert("--from=hf", f"--input={hf_dir}", f"--output={workdir}") == 0
  params = weight_table.flatten(workdir_params.read_run(str(workdir)).params)
  assert not any(path.startswith("output_") for path in params)
  config = transformer_xl_weights.model_config(model.config.to_dict(), "c")
  state = {k: v.numpy() for k, v in model.state_dict().items()}
  for row in transformer_xl_weights.rows(config):
    if row.group == weight_table.REQUIRED_GROUP:
      theirs = state[row.theirs.removeprefix("transformer.")]
      np.testing.assert_array_equal(weight_table.to_theirs(row, params[row.ours]), theirs)
  assert _convert("--to=hf", f"--input={workdir}", f"--output={back}") == 0
  _, info = transformers.TransfoXLModel.from_pretrained(back, output_loading_info=True)
  assert not info["missing_keys"] and not info["unexpected_keys"], info


@pytest.mark.parametrize("safe", [True, False], ids=["safetensors", "bin"])
def test_adaptive_round_trip_is_bit_identical_and_loads_in_transformers(safe, tmp_path):
  """The transfo-xl-wt103 layout (cutoffs, div_val 4, the softmax tied to the tail clusters'
  input projections) at a tiny size: every tensor back bit-identical, the same log-probs."""
  sizes = dict(SIZE, vocab_size=200, cutoffs=[20, 60, 120], div_val=4, d_embed=64)
  model = transformer_xl_reference.random_transfo_xl(transformers, torch, 5, **sizes)
  assert model.config.tie_projs == [False, True, True, True]
  hf_dir, workdir, back = tmp_path / "hf", tmp_path / "workdir", tmp_path / "back"
  model.save_pretrained(hf_dir, safe_serialization=safe)
  assert _convert("--from=hf", f"--input={hf_dir}", f"--output={workdir}") == 0
  run = workdir_params.read_run(str(workdir))
  assert run.model.adaptive.cutoffs == (20, 60, 120) and run.model.adaptive.div_val == 4
  params = weight_table.flatten(run.params)
  assert params["bert/word_embedding_3/embedding"].shape == (80, 64 // 4**3)
  assert "output_projection/kernel" in params and "output_projection_1/kernel" not in params
  assert _convert("--to=hf", f"--input={workdir}", f"--output={back}") == 0
  reloaded, info = transformers.TransfoXLLMHeadModel.from_pretrained(back, output_loading_info=True)
  assert not info["missing_keys"] and not info["unexpected_keys"], info
  assert reloaded.config.tie_projs == model.config.tie_projs
  reloaded.eval()
  original = {k: v.numpy() for k, v in model.state_dict().items()}
  assert set(reloaded.state_dict()) == set(original)
  for name, value in reloaded.state_dict().items():
    np.testing.assert_array_equal(value.numpy(), original[name], err_msg=name)
  # The same tensors compute the same to float rounding only: transformers' adaptive softmax
  # is not bitwise reproducible across loads (its own save + load differs by ~2e-6).
  ids = np.random.default_rng(1).integers(0, 200, (2, 6))
  first, again = _log_probs(model, ids), _log_probs(reloaded, ids)
  np.testing.assert_allclose(
    again.prediction_scores.numpy(), first.prediction_scores.numpy(), atol=1e-5
  )


@pytest.mark.parametrize(
  "change, message",
  [
    (dict(cutoffs=[20, 80]), "model.adaptive.cutoffs=[20, 80] must all be below"),
    (dict(cutoffs=[20, 40], div_val=64), "leaves the last cluster's table 16 // 64**2 = 0 wide"),
    (dict(cutoffs=[], d_head=6), "d_head=6 x n_head=4 != d_model=32"),
  ],
)
def test_unconvertible_checkpoints_are_one_line_errors(change, message, tmp_path, capsys):
  values = dict(SIZE, **{"div_val": 1, **change})
  transformers.TransfoXLConfig(**values).save_pretrained(tmp_path / "hf")
  assert _convert("--from=hf", f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'w'}") == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and message in err[0], err
