"""tools/convert with sharded (``model.safetensors.index.json``) and bf16 safetensors, both
directions, checked against what transformers writes and loads."""

import copy
import json

import ml_dtypes
import numpy as np
import pytest
from safetensors import numpy as safetensors_numpy

from bert_jax.models.interop import weight_table
from bert_jax.tools import convert, workdir_params
from tests import hf_reference

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

_SIZE = dict(
  vocab_size=120,
  hidden_size=32,
  num_hidden_layers=2,
  num_attention_heads=4,
  intermediate_size=48,
  max_position_embeddings=24,
)
_TIED = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}


def _params(workdir):
  return weight_table.flatten(workdir_params.read_run(str(workdir)).params)


def _to_bf16_and_back(array):
  return np.asarray(array, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  """{kind: HF dir} of one random BertForPreTraining saved as one file, sharded and in bf16."""
  root = tmp_path_factory.mktemp("shards")
  model = hf_reference.random_bert(transformers, torch, seed=4, **_SIZE)
  model.save_pretrained(root / "single")
  model.save_pretrained(root / "sharded", max_shard_size="20KB")
  # .to() casts in place: a copy, so the model keeps its float32 weights.
  copy.deepcopy(model).to(torch.bfloat16).save_pretrained(
    root / "bf16_sharded", max_shard_size="20KB"
  )
  dirs = {kind: root / kind for kind in ("single", "sharded", "bf16_sharded")}
  for kind, directory in dirs.items():
    convert.from_hf(str(directory), str(root / f"converted_{kind}"))
  return model, root


def test_sharded_and_bf16_directories_convert(saved):
  _, root = saved
  shards = sorted(p.name for p in (root / "sharded").glob("model-*.safetensors"))
  assert len(shards) > 2 and (root / "sharded" / "model.safetensors.index.json").exists()
  single = _params(root / "converted_single")
  sharded = _params(root / "converted_sharded")
  bf16 = _params(root / "converted_bf16_sharded")
  assert single.keys() == sharded.keys() == bf16.keys()
  for name, value in single.items():
    assert sharded[name].dtype == bf16[name].dtype == np.float32, name
    np.testing.assert_array_equal(sharded[name], value, err_msg=name)
    np.testing.assert_array_equal(bf16[name], _to_bf16_and_back(value), err_msg=name)
  pooler = next(name for name in single if "pooler" in name and "kernel" in name)
  assert not np.array_equal(bf16[pooler], single[pooler])  # bf16 did round.


def test_export_bf16_shards_that_transformers_loads(saved, tmp_path):
  model, root = saved
  argv = [
    "convert",
    "--to=hf",
    f"--input={root / 'converted_single'}",
    f"--output={tmp_path / 'out'}",
    "--dtype=bfloat16",
    "--max_shard_size=20KB",
  ]
  assert convert.main(argv) == 0
  index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
  shards = set(index["weight_map"].values())
  assert len(shards) > 2
  for shard in shards:  # The limit counts tensor bytes, as transformers' does.
    tensors = safetensors_numpy.load_file(str(tmp_path / "out" / shard))
    assert sum(t.nbytes for t in tensors.values()) <= 20_000, shard
  loaded, info = transformers.BertForPreTraining.from_pretrained(
    tmp_path / "out", output_loading_info=True, torch_dtype="auto"
  )
  assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == ([], [], [])
  original, exported = model.state_dict(), loaded.state_dict()
  for name in sorted(set(original) - _TIED):
    assert exported[name].dtype == torch.bfloat16, name
    assert torch.equal(exported[name], original[name].to(torch.bfloat16)), name
  # And back: the bf16 shards convert to the same values the bf16 save of transformers gave.
  convert.from_hf(str(tmp_path / "out"), str(tmp_path / "again"))
  again, bf16 = _params(tmp_path / "again"), _params(root / "converted_bf16_sharded")
  for name, value in bf16.items():
    np.testing.assert_array_equal(again[name], value, err_msg=name)


def test_a_float32_export_sharded_loads_unchanged(saved, tmp_path):
  model, root = saved
  convert.to_hf(str(root / "converted_sharded"), str(tmp_path / "out"), max_shard_size="30KB")
  loaded = transformers.BertForPreTraining.from_pretrained(tmp_path / "out")
  original, exported = model.state_dict(), loaded.state_dict()
  for name in sorted(set(original) - _TIED):
    assert torch.equal(exported[name], original[name]), name


@pytest.mark.parametrize(
  "flag,expected",
  [
    ("--max_shard_size=lots", "--max_shard_size='lots' is not a size; write e.g. 5GB"),
    ("--dtype=int8", "--dtype"),
  ],
)
def test_bad_export_flags_are_one_line(saved, tmp_path, capsys, flag, expected):
  _, root = saved
  argv = ["convert", "--to=hf", f"--input={root / 'converted_single'}", f"--output={tmp_path}/o"]
  assert convert.main([*argv, flag]) == 2
  assert expected in capsys.readouterr().err
  assert not (tmp_path / "o").exists()


def test_an_index_naming_a_missing_shard_is_one_line(saved, tmp_path, capsys):
  _, root = saved
  broken = tmp_path / "broken"
  broken.mkdir()
  for path in (root / "sharded").iterdir():
    if not path.name.startswith("model-00002"):
      (broken / path.name).write_bytes(path.read_bytes())
  argv = ["convert", "--from=hf", f"--input={broken}", f"--output={tmp_path / 'o'}"]
  assert convert.main(argv) == 2
  assert "names the shard model-00002-of-" in capsys.readouterr().err
