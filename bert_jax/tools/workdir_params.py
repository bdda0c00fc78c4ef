"""Parameters of bert_jax workdirs for the tools: read any run's, write a converted model's.

A converted model is an ordinary workdir: ``config.json`` with the resolved ``model`` section
(and the ``data`` section's vocab when the source had one), ``vocab.txt``, and an Orbax
checkpoint ``checkpoints/0/state`` holding ``{"params": ...}`` in the trainer's layout, so
``init_from=<workdir>`` restores it like a pretraining run.
"""

import dataclasses
import json
import shutil

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from bert_jax import names
from bert_jax import workdir as workdir_lib
from bert_jax.data import bpe_tokenization
from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.config import ModelConfig, stored_model_section
from bert_jax.tasks import registry

VOCAB_FILE = "vocab.txt"


@dataclasses.dataclass(frozen=True)
class Run:
  """What the tools need of a workdir: its newest params and what produced them."""

  params: dict  # Nested numpy arrays, the trainer's layout (scanned if the run was).
  model: ModelConfig
  config: dict  # The parsed config.json.
  step_dir: epath.Path


def read_run(path: str, flag: str = "--input") -> Run:
  """Loads the newest checkpoint's params of a workdir (or one checkpoint dir) as numpy.

  Args:
    path: a workdir, its ``checkpoints/`` directory or one ``checkpoints/<step>``.
    flag: the tool's flag that named ``path``, for the error messages.

  Raises:
    UserInputError: no checkpoint, or no ``config.json`` in the workdir.
  """
  if not epath.Path(path).exists():
    raise UserInputError(f"{flag}={path} does not exist; pass a bert_jax workdir or checkpoint")
  try:
    step_dir = workdir_lib.find_checkpoint(epath.Path(path).resolve())  # Orbax: absolute.
  except UserInputError as error:
    raise UserInputError(f"{flag}={error}") from None
  config_path = step_dir.parent.parent / "config.json"
  if not config_path.exists():
    raise UserInputError(
      f"{config_path} is missing; the tools need the run's config.json "
      "(its model section) next to checkpoints/"
    )
  config = json.loads(config_path.read_text())
  with ocp.Checkpointer(ocp.PyTreeCheckpointHandler()) as checkpointer:
    metadata = checkpointer.metadata(step_dir / "state").item_metadata.tree["params"]
    restore_args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), metadata)
    params = checkpointer.restore(
      step_dir / "state",
      args=ocp.args.PyTreeRestore(
        item={"params": metadata}, restore_args={"params": restore_args}, partial_restore=True
      ),
    )["params"]
  return Run(
    params=params,
    model=families.model_config_from_dict(stored_model_section(config)),
    config=config,
    step_dir=step_dir,
  )


def run_vocab(run: Run):
  """(vocab path or None, lowercase) of a run's config.json.

  A converted model names its own ``vocab.txt`` (stored relative to the workdir, so it is
  found wherever the workdir now is); a run with an empty ``data.vocab_path`` tokenised with
  the vocab its ``init_from`` resolves to (`registry.resolve_vocab_path`), or the embedded
  default vocab; a converted model without a ``data`` section has no known vocab.
  """
  data = run.config.get("data")
  if not data or "vocab_path" not in data:
    return None, True
  workdir = workdir_lib.of_checkpoint(run.step_dir)
  # Pretraining reads an empty vocab_path as the embedded vocab, whatever its init_from.
  fine_tuned = run.config.get("task", names.PRETRAINING) != names.PRETRAINING
  vocab_path = registry.resolve_vocab_path(
    workdir.resolve(data["vocab_path"]),
    workdir.resolve(run.config.get("init_from", "")) if fine_tuned else "",
  )
  return vocab_path, bool(data.get("lowercase", True))


def write_converted(
  directory: epath.Path,
  params,
  model: ModelConfig,
  *,
  source: str,
  vocab_path=None,
  lowercase: bool = True,
):
  """Writes a converted model as a workdir into ``directory`` (which must be empty).

  Args:
    directory: the directory to fill.
    params: nested numpy params in the trainer's layout (unscanned).
    model: the model they belong to.
    source: what they were converted from (recorded in config.json).
    vocab_path: the source's vocab.txt, copied as ``vocab.txt``; a RoBERTa ``vocab.json``
      (with its merges.txt) or a SentencePiece ``.model`` keeps its name; None if unknown.
    lowercase: whether that vocab is uncased.
  """
  # Every family's sections, as a run stores its model (a Hugging Face reader gives its own).
  model_json = json.loads(json.dumps(families.complete(model).to_dict()))
  config = {"model": model_json, "converted_from": source}
  if vocab_path is not None:
    name = epath.Path(vocab_path).name if vocab_path.endswith((".json", ".model")) else VOCAB_FILE
    for path in [vocab_path, *bpe_tokenization.companion_files(vocab_path)]:
      shutil.copyfile(path, directory / (name if path == vocab_path else epath.Path(path).name))
    # Relative to the workdir, so the converted model can be copied or moved.
    config["data"] = {"vocab_path": name, "lowercase": lowercase}
  (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
  with ocp.Checkpointer(ocp.StandardCheckpointHandler()) as checkpointer:
    checkpointer.save(
      directory.resolve() / "checkpoints" / "0" / "state",
      args=ocp.args.StandardSave({"params": params}),
    )
