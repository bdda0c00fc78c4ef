"""Reading a Hugging Face model directory: its config.json, its weights, the model they make.

Weights come from ``model.safetensors`` (one file or shards; float32, bf16 or f16, read without
torch) or ``pytorch_model.bin`` (needs torch); ``config.json``'s ``model_type`` picks the family
(`models/families.py`); ELECTRA pairs a discriminator directory with its generator's,
or converts a generator (ElectraForMaskedLM) alone (`HfInterop.read_alone`).
"""

import json
import pickle

from etils import epath

from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.interop import safetensors_files

_SAFETENSORS = "model.safetensors"
_TORCH_BIN = "pytorch_model.bin"


def read_json(path: epath.Path, what: str):
  """The JSON object in ``path``; a missing or invalid file is a one-line error naming ``what``."""
  if not path.exists():
    raise UserInputError(f"{path} does not exist; {what}")
  try:
    return json.loads(path.read_text())
  except (json.JSONDecodeError, UnicodeDecodeError) as error:
    raise UserInputError(f"{path} is not valid JSON ({error}); {what}") from None


def _read_torch_bin(path: epath.Path):
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise UserInputError(
      f"{path} is a PyTorch pickle and reading it needs torch, which is "
      "not installed; install torch (CPU is enough) or convert a "
      "model.safetensors"
    ) from None
  try:
    state = torch.load(str(path), map_location="cpu", weights_only=True)
  except (RuntimeError, pickle.UnpicklingError, EOFError, OSError, ValueError) as error:
    raise UserInputError(f"{path} is not a readable PyTorch checkpoint ({error})") from None
  if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
    raise UserInputError(
      f"{path} is not a state dict of tensors; save it with model.save_pretrained()"
    )
  return {name: tensor.float().numpy() for name, tensor in state.items()}


def read_state(directory: epath.Path):
  """(weights path, {name: float32 array}) of a Hugging Face directory's safetensors or .bin."""
  safetensors = safetensors_files.read_state(directory)  # One file or shards; f32/bf16/f16.
  if safetensors is not None:
    return safetensors
  if (directory / _TORCH_BIN).exists():
    return directory / _TORCH_BIN, _read_torch_bin(directory / _TORCH_BIN)
  raise UserInputError(
    f"{directory} holds neither {_SAFETENSORS} nor {_TORCH_BIN}; pass a "
    "Hugging Face model directory (save_pretrained output)"
  )


def read_model(directory: epath.Path, generator=None):
  """(model, params, weights path) of a Hugging Face directory (and of the directory it pairs
  with, ELECTRA's generator: ``generator``)."""
  config_path = directory / "config.json"
  values = read_json(config_path, "a Hugging Face model directory needs it")
  interop = families.for_config_json(values, str(config_path)).hf
  if generator and not interop.pair:
    raise UserInputError(
      f"--generator pairs a directory with an ELECTRA discriminator; {interop.label} takes "
      "none: drop it"
    )
  if not interop.pair:
    model = interop.model_config(values, str(config_path), None)  # Before any weights.
    weights_path, state = read_state(directory)
    return model, interop.read_params(state, model, str(weights_path), None), weights_path
  weights_path, state = read_state(directory)
  source, pair_values, pair_state = str(weights_path), None, None
  alone = interop.read_alone and interop.read_alone(
    values, state, str(config_path), source, generator
  )
  if alone:
    return (*alone, weights_path)
  if generator:
    pair_dir = epath.Path(generator)
    if not pair_dir.is_dir():
      raise UserInputError(
        f"--generator={generator} is not a directory; pass the ElectraForMaskedLM directory"
      )
    pair_values = read_json(pair_dir / "config.json", "the generator needs it")
    pair_path, pair_state = read_state(pair_dir)
    source = f"{weights_path} + {pair_path}"
  model = interop.model_config(values, source, pair_values)
  return model, interop.read_params(state, model, source, pair_state), source
