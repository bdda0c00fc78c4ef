"""``init_from``: start a run from another run's parameters (fine-tuning, continued training).

Parameters present in both the checkpoint and the new model with the same shape are taken from
the checkpoint; task heads only the new model has keep their fresh init, and heads only the
checkpoint has (the pretraining MLM/NSP heads) are left behind; both are listed in the log.
Anything else that does not fit is an error, and all of it is reported in one message: another
vocab (word-embedding rows), another number of positions or segment types, another label count
of a head both have, encoder parameters of another shape, or encoder parameters only one side
has (another depth or layout), except a pooler the checkpoint lacks (fresh init). The
optimizer state, step, rng and data position are never taken over.
"""

import json

import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging
from etils import epath
from flax import traverse_util

from bert_jax import workdir as workdir_lib
from bert_jax.errors import UserInputError
from bert_jax.models.config import stored_model_section
from bert_jax.train import layer_layout

# The shared trunk's name in every task model (heads are the other top-level names).
ENCODER = "bert"
# Checkpoints of masked-LM-only models (Hugging Face BertForMaskedLM) have no pooler; like
# transformers, the pooler then starts from its fresh init instead of being an error.
_OPTIONAL_ENCODER_PREFIXES = (ENCODER + "/pooler/",)
# Embedding tables whose first dimension is a config key: the key and what it counts.
_EMBEDDING_SIZES = {
  "bert/embeddings/word_embeddings/embedding": ("vocab_size", "vocab entries"),
  "bert/embeddings/position_embeddings/embedding": ("max_position_embeddings", "positions"),
  "bert/embeddings/token_type_embeddings/embedding": ("type_vocab_size", "segment types"),
}


def _stored_model_section(step_dir: epath.Path) -> dict:
  """The ``model`` section of the checkpoint's ``config.json`` (empty if it has none)."""
  return stored_model_section(workdir_lib.of_checkpoint(step_dir).read_config())


def _differing_model_keys(stored_model: dict, model_config) -> str:
  """ "model.x=<checkpoint's>" for each model key where the checkpoint's config differs."""
  if model_config is None or not stored_model:
    return ""
  # JSON's view of ours (tuples as lists), compared key by key, nested sections dotted.
  ours = _dotted(json.loads(json.dumps(model_config.to_dict())))
  theirs = _dotted(stored_model)
  diffs = [
    f"--config.model.{k}={theirs[k]}" for k in sorted(theirs) if k in ours and theirs[k] != ours[k]
  ]
  return (
    f"; its config.json has another model: pass {' '.join(diffs)} to match it (fine-tuning "
    "configs take every model key you leave unset from init_from)"
    if diffs
    else ""
  )


def _dotted(section: dict, prefix: str = "") -> dict:
  """{"recurrence.mem_len": value, ...}: a model section's keys, nested sections dotted."""
  flat = {}
  for key, value in section.items():
    if isinstance(value, dict):
      flat.update(_dotted(value, f"{prefix}{key}."))
    else:
      flat[f"{prefix}{key}"] = value
  return flat


def mismatch_problems(stored: dict, wanted: dict) -> list[str]:
  """Every way the checkpoint's parameters do not fit the model's, one phrase each.

  Args:
    stored: {param path: shape} of the checkpoint.
    wanted: {param path: shape} of the new model.

  Returns:
    Phrases naming the problem and its fix; empty when the checkpoint fits.
  """
  problems, other_shapes, heads = [], [], {}
  for path in sorted(set(stored) & set(wanted)):
    theirs, ours = tuple(stored[path]), tuple(wanted[path])
    if theirs == ours:
      continue
    if path in _EMBEDDING_SIZES and theirs[1:] == ours[1:]:
      key, what = _EMBEDDING_SIZES[path]
      fix = (
        f"set model.vocab_size={theirs[0]} and data.vocab_path to the checkpoint's vocab"
        if key == "vocab_size"
        else f"set model.{key}={theirs[0]}"
      )
      problems.append(
        f"the checkpoint has {theirs[0]} {what}, this model {ours[0]} "
        f"(model.{key}={ours[0]}): {fix}"
      )
    elif not path.startswith(ENCODER + "/") and theirs[:-1] == ours[:-1]:
      heads.setdefault(path.split("/")[0], (theirs[-1], ours[-1]))
    else:
      other_shapes.append(f"{path} {theirs} vs {ours}")
  for head, (theirs, ours) in sorted(heads.items()):
    problems.append(
      f"head {head!r} has {theirs} labels in the checkpoint, {ours} in this model: make the "
      f"task's label count {theirs}, or init from a checkpoint without this head (e.g. the "
      "pretraining run)"
    )
  if other_shapes:
    problems.append(
      f"{len(other_shapes)} parameters of another shape (checkpoint vs model), "
      f"e.g. {'; '.join(other_shapes[:3])}: match the model.* keys"
    )
  for missing, side, other in (
    (set(wanted) - set(stored), "this model has", "checkpoint"),
    (set(stored) - set(wanted), "the checkpoint has", "model"),
  ):
    encoder = sorted(
      p
      for p in missing
      if p.startswith(ENCODER + "/")
      and not (other == "checkpoint" and p.startswith(_OPTIONAL_ENCODER_PREFIXES))
    )
    if encoder:
      problems.append(
        f"{side} {len(encoder)} encoder parameters the {other} lacks, e.g. "
        f"{', '.join(encoder[:3])}: match model.num_layers / scan_layers / "
        "reversible"
      )
  return problems


def _stored_params(step_dir: epath.Path):
  """The checkpoint's params metadata, flat: {path: metadata with .shape}."""
  with ocp.Checkpointer(ocp.PyTreeCheckpointHandler()) as checkpointer:
    return traverse_util.flatten_dict(
      checkpointer.metadata(step_dir / "state").item_metadata.tree["params"], sep="/"
    )


def _stored_shapes(stored: dict, wanted: dict) -> dict:
  """{path: shape} of the checkpoint, in the model's layer layout (scanned or not)."""
  shapes = {k: tuple(v.shape) for k, v in stored.items()}
  to_layout = layer_layout.layout(wanted)
  from_layout = layer_layout.layout(stored)
  if to_layout and from_layout and to_layout != from_layout:
    return layer_layout.convert_shapes(shapes, to_layout)
  return shapes


def check_fits(init_from: str, abstract_params, model_config=None) -> epath.Path:
  """Raises one UserInputError listing every way the checkpoint does not fit the model.

  Reads only the checkpoint's metadata, so a misfit fails before any parameter is built.

  Args:
    init_from: a workdir or checkpoint directory.
    abstract_params: the new model's params (anything with ``.shape`` leaves).
    model_config: this run's `ModelConfig`; when given, the error also lists the model keys in
      which the checkpoint's config.json differs.

  Returns:
    The checkpoint's step directory.
  """
  step_dir = workdir_lib.find_checkpoint(init_from, flag="init_from")
  wanted = traverse_util.flatten_dict(abstract_params, sep="/")
  stored = _stored_shapes(_stored_params(step_dir), wanted)
  problems = mismatch_problems(stored, {k: v.shape for k, v in wanted.items()})
  if problems:
    raise UserInputError(
      f"init_from {step_dir} does not fit this model: {'; '.join(problems)}"
      f"{_differing_model_keys(_stored_model_section(step_dir), model_config)}"
    )
  if not set(stored) & set(wanted):
    raise UserInputError(
      f"init_from {step_dir} shares no parameter with this model; is it "
      "a bert_jax checkpoint of the same architecture?"
    )
  return step_dir


def overlay_params(params, step_dir: epath.Path, abstract_params):
  """Returns ``params`` with every parameter the checkpoint holds replaced by the checkpoint's.

  Args:
    params: the freshly initialised (sharded) params of the new model.
    step_dir: the checkpoint, as `check_fits` returned it (call that first: it reports
      every misfit in one line, before the model is initialised).
    abstract_params: the params' ShapeDtypeStructs with shardings (restore targets).
  """
  stored = _stored_params(step_dir)
  wanted = traverse_util.flatten_dict(abstract_params, sep="/")
  to_layout, from_layout = layer_layout.layout(wanted), layer_layout.layout(stored)
  if to_layout and from_layout and to_layout != from_layout:
    # Another layer layout: read on the host, stack or split the layers, then shard.
    converted = layer_layout.convert_arrays(_restore_numpy(step_dir, stored), to_layout)
    restored = {
      k: jax.device_put(v, wanted[k].sharding) for k, v in converted.items() if k in wanted
    }
    stored = converted
  else:
    shared = sorted(set(stored) & set(wanted))
    target = traverse_util.unflatten_dict({k: wanted[k] for k in shared}, sep="/")
    with ocp.Checkpointer(ocp.PyTreeCheckpointHandler()) as checkpointer:
      restored = traverse_util.flatten_dict(
        checkpointer.restore(
          step_dir / "state",
          args=ocp.args.PyTreeRestore(
            item={"params": target},
            restore_args={"params": ocp.checkpoint_utils.construct_restore_args(target)},
            partial_restore=True,
          ),
        )["params"],
        sep="/",
      )
  fresh = sorted({k.split("/")[0] for k in set(wanted) - set(stored)})
  dropped = sorted({k.split("/")[0] for k in set(stored) - set(wanted)})
  logging.info(
    "init_from %s: restored %d parameters; new heads (fresh init): %s; checkpoint "
    "heads left out: %s",
    step_dir,
    len(restored),
    ", ".join(fresh) or "none",
    ", ".join(dropped) or "none",
  )
  flat_params = traverse_util.flatten_dict(params, sep="/")
  flat_params.update(restored)
  return traverse_util.unflatten_dict(flat_params, sep="/")


def _restore_numpy(step_dir: epath.Path, stored: dict) -> dict:
  """Every parameter of the checkpoint as a host numpy array, flat."""
  target = traverse_util.unflatten_dict(stored, sep="/")
  restore_args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), target)
  with ocp.Checkpointer(ocp.PyTreeCheckpointHandler()) as checkpointer:
    restored = checkpointer.restore(
      step_dir / "state",
      args=ocp.args.PyTreeRestore(
        item={"params": target}, restore_args={"params": restore_args}, partial_restore=True
      ),
    )
  return traverse_util.flatten_dict(restored["params"], sep="/")
