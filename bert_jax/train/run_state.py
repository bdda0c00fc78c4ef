"""Starting a run: the resolved config in the workdir, then resume > init_from > scratch."""

import json

import jax
import ml_collections
from etils import epath

from bert_jax import workdir as workdir_lib
from bert_jax.errors import UserInputError
from bert_jax.models.config import ModelConfig, stored_model_section
from bert_jax.train import checkpoint_recovery
from bert_jax.train import init_from as init_from_lib
from bert_jax.train import state as state_lib
from bert_jax.train.checkpointing import Checkpointer


def resolved_config(
  config: ml_collections.ConfigDict, model: ModelConfig, workdir, lowercase: bool | None = None
) -> dict:
  """The config.json of a run: the config with its ``model`` section resolved.

  The model section is the one actually built (size presets expanded, unset keys taken from
  init_from's), ``data.lowercase`` the casing used; paths inside the workdir are stored
  relative to it so it can be moved.
  """
  resolved = json.loads(config.to_json_best_effort())
  resolved["model"] = json.loads(json.dumps(model.to_dict()))
  if lowercase is not None:
    resolved.setdefault("data", {})["lowercase"] = lowercase
  return workdir_lib.Workdir.at(workdir).relative_paths(resolved)


def check_workdir(workdir: epath.Path, resolved: dict):
  """Refuses a workdir that holds converted weights or a run of a different model; reads only.

  Only the ``model`` section must match, and only once the workdir holds a checkpoint: longer
  training, other logging or a new learning rate may resume an existing run, another
  architecture may not (its checkpoints would not load). A run that failed before its first
  checkpoint binds nothing.
  """
  run = workdir_lib.Workdir.at(workdir)
  if not (run.config_json.exists() and run.has_checkpoints()):
    return
  old = run.read_config()
  if "converted_from" in old:
    raise UserInputError(
      f"{workdir} holds converted weights ({old['converted_from']}), not a run to resume; "
      f"pass --config.init_from={workdir} and a new --workdir"
    )
  old_model, new_model = stored_model_section(old), resolved.get("model", {})
  for key in sorted(set(old_model) | set(new_model)):
    if old_model.get(key) != new_model.get(key):
      raise UserInputError(
        f"{workdir} holds a run with model.{key}={old_model.get(key)!r} but the config "
        f"says {new_model.get(key)!r}; use a new --workdir or the original config"
      )


def write_config_json(workdir: epath.Path, resolved: dict):
  """Writes ``config.json`` (process 0), creating the workdir; call after every check passed."""
  if jax.process_index() == 0:
    run = workdir_lib.Workdir.at(workdir)
    run.path.mkdir(parents=True, exist_ok=True)
    run.config_json.write_text(json.dumps(resolved, indent=2, sort_keys=True) + "\n")


def restore_or_initialize(
  checkpointer: Checkpointer,
  init_params,
  optimizer,
  abstract_state,
  state_shardings,
  seed: int,
  rng_sharding,
  init_from: str = "",
  model_config: ModelConfig | None = None,
  init_overlay=None,
  init_memory=None,
):
  """Returns (state, rng, data position), by this precedence, decided here only.

  1. The newest checkpoint in the workdir that restores (resume exactly: state, rng, data
     position); damaged newer ones are moved aside (see `checkpoint_recovery`).
  2. ``init_from``: a fresh state from ``seed`` whose parameters are overlaid with the
     compatible ones of that checkpoint (new heads keep their init; see `init_from.py`;
     ``model_config`` lets its errors name the model keys to change).
  3. A fresh state from ``seed``, its params passed through ``init_overlay`` when given
     (distillation: the student from every other teacher layer).

  A model with segment memory (``init_memory``, see `state.RecurrentTrainState`) resumes with
  its checkpointed memory and starts with an empty one otherwise (init_from included).
  """
  param_rng, dropout_rng = jax.random.split(jax.random.key(seed))
  rng = jax.device_put(dropout_rng, rng_sharding)
  restored = checkpoint_recovery.restore_newest(checkpointer, abstract_state, rng)
  if restored is not None:
    return restored
  # Metadata only: a checkpoint that does not fit fails before the (large) init.
  source = (
    init_from_lib.check_fits(init_from, abstract_state.params, model_config) if init_from else None
  )
  state = state_lib.init_state(init_params, optimizer, param_rng, state_shardings, init_memory)
  if source:
    params = init_from_lib.overlay_params(state.params, source, abstract_state.params)
    # The optimizer state starts fresh; rebuild it for the restored params.
    init_opt_state = jax.jit(optimizer.init, out_shardings=state_shardings.opt_state)
    state = state.replace(
      params=jax.device_put(params, state_shardings.params), opt_state=init_opt_state(params)
    )
  elif init_overlay is not None:
    params = init_overlay(state.params)
    init_opt_state = jax.jit(optimizer.init, out_shardings=state_shardings.opt_state)
    state = state.replace(params=params, opt_state=init_opt_state(params))
  return state, rng, 0
