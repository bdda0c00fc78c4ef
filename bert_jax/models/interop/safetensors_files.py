"""Hugging Face safetensors checkpoints: one file or shards with an index, float32 or bf16.

transformers saves big models as ``model-00001-of-0000N.safetensors`` shards listed in
``model.safetensors.index.json`` ({"metadata": {"total_size": bytes}, "weight_map": {tensor
name: shard file}}), and half-precision models with BF16 / F16 tensors. Reading accepts all of
these and returns float32 arrays (bert_jax keeps params in float32); writing produces the same
layout transformers writes, so ``from_pretrained`` loads it. No torch needed either way.
"""

import json
import re

import ml_dtypes
import numpy as np
from etils import epath
from safetensors import SafetensorError
from safetensors import numpy as safetensors_numpy

from bert_jax.errors import UserInputError

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# Tensor dtypes of a written checkpoint: flag value -> numpy dtype.
DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?B)?\s*$", re.IGNORECASE)
_UNITS = {None: 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9}


def parse_size(text: str) -> int:
  """Bytes of a size such as ``"5GB"``, ``"200MB"``, ``"100KB"`` or ``"123"`` (decimal units,
  as transformers' ``max_shard_size``)."""
  match = _SIZE.match(text or "")
  if not match or float(match.group(1)) <= 0:
    raise UserInputError(f"--max_shard_size={text!r} is not a size; write e.g. 5GB, 200MB or 100KB")
  unit = match.group(2).upper() if match.group(2) else None
  return int(float(match.group(1)) * _UNITS[unit])


def _read_file(path: epath.Path) -> dict:
  try:
    tensors = safetensors_numpy.load_file(str(path))
  except (SafetensorError, OSError, ValueError, TypeError) as error:
    raise UserInputError(
      f"{path} is not a readable safetensors file ({error}); re-download or re-save it"
    ) from None
  return {name: np.asarray(value, np.float32) for name, value in tensors.items()}


def read_state(directory) -> tuple[epath.Path, dict] | None:
  """(what was read, {tensor name: float32 array}) of a model directory's safetensors.

  Args:
    directory: a Hugging Face model directory.

  Returns:
    None when it holds neither ``model.safetensors`` nor ``model.safetensors.index.json``.

  Raises:
    UserInputError: an unreadable file, an index that is not JSON or names a missing shard.
  """
  directory = epath.Path(directory)
  if (directory / SINGLE_FILE).exists():
    return directory / SINGLE_FILE, _read_file(directory / SINGLE_FILE)
  index_path = directory / INDEX_FILE
  if not index_path.exists():
    return None
  try:
    weight_map = json.loads(index_path.read_text())["weight_map"]
  except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as error:
    raise UserInputError(
      f"{index_path} is not a safetensors index ({type(error).__name__}: {error}); it needs a "
      '"weight_map" of tensor name -> shard file'
    ) from None
  state = {}
  for shard in sorted(set(weight_map.values())):
    if not (directory / shard).exists():
      raise UserInputError(
        f"{index_path} names the shard {shard}, which is missing from {directory}; "
        "download every model-*.safetensors file"
      )
    state.update(_read_file(directory / shard))
  missing = sorted(set(weight_map) - set(state))
  if missing:
    raise UserInputError(
      f"{index_path} lists {len(missing)} tensors its shards lack, e.g. {missing[:3]}"
    )
  return index_path, state


def _shards(state: dict, max_bytes: int) -> list[dict]:
  """Tensors in name order, cut into groups of at most ``max_bytes`` (a bigger tensor alone)."""
  groups, size = [{}], 0
  for name in sorted(state):
    nbytes = state[name].nbytes
    if groups[-1] and size + nbytes > max_bytes:
      groups.append({})
      size = 0
    groups[-1][name] = state[name]
    size += nbytes
  return groups


def write_state(directory, state: dict, *, dtype: str = "float32", max_shard_bytes: int = 0):
  """Writes ``state`` as transformers does: one file, or shards and an index.

  Args:
    directory: an existing, empty directory.
    state: {tensor name: array}.
    dtype: a key of `DTYPES`; float32 tensors are rounded to it (round to nearest even).
    max_shard_bytes: > 0: shards of at most this many bytes (a larger tensor gets a shard of
      its own) listed in ``model.safetensors.index.json``; 0: one ``model.safetensors``.

  Returns:
    The names of the files written.
  """
  directory = epath.Path(directory)
  cast = {k: np.ascontiguousarray(np.asarray(v).astype(DTYPES[dtype])) for k, v in state.items()}
  # transformers refuses safetensors files without this format tag.
  metadata = {"format": "pt"}
  total = sum(v.nbytes for v in cast.values())
  if not max_shard_bytes or total <= max_shard_bytes:
    safetensors_numpy.save_file(cast, str(directory / SINGLE_FILE), metadata=metadata)
    return [SINGLE_FILE]
  groups = _shards(cast, max_shard_bytes)
  weight_map, names = {}, []
  for i, group in enumerate(groups, start=1):
    name = f"model-{i:05d}-of-{len(groups):05d}.safetensors"
    safetensors_numpy.save_file(group, str(directory / name), metadata=metadata)
    weight_map.update(dict.fromkeys(group, name))
    names.append(name)
  index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
  (directory / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
  return names + [INDEX_FILE]
