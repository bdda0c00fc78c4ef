"""``init_from``: start a run from another run's parameters (fine-tuning, continued training).

Parameters present in both the checkpoint and the new model with the same shape are taken from
the checkpoint; parameters only the new model has (new task heads) keep their fresh init and are
listed in the log; a shape mismatch or a checkpoint without any shared parameter is an error
naming them. The optimizer state, step, rng and data position are never taken over.
"""

import jax
import orbax.checkpoint as ocp
from absl import logging
from etils import epath

from bert_jax.errors import UserInputError


def find_checkpoint(path: str) -> epath.Path:
  """Resolves a workdir, a ``checkpoints/`` dir or one ``checkpoints/<step>`` dir to a step dir."""
  path = epath.Path(path)
  if (path / "state").exists():
    return path
  directory = path / "checkpoints" if (path / "checkpoints").exists() else path
  steps = sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) if (
      directory.exists()) else []
  if not steps:
    raise UserInputError(f"init_from={path} holds no checkpoint; point it at a workdir, its "
                         "checkpoints/ directory or one checkpoints/<step> directory")
  return directory / str(steps[-1])


def _flat(tree):
  def name(key):
    return str(getattr(key, "key", getattr(key, "name", key)))
  return {"/".join(name(k) for k in path): leaf
          for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def overlay_params(params, init_from: str, abstract_params):
  """Returns ``params`` with every compatible parameter replaced by the checkpoint's.

  Args:
    params: the freshly initialised (sharded) params of the new model.
    init_from: a workdir or checkpoint directory.
    abstract_params: the params' ShapeDtypeStructs with shardings (restore targets).
  """
  step_dir = find_checkpoint(init_from)
  with ocp.Checkpointer(ocp.PyTreeCheckpointHandler()) as checkpointer:
    stored = _flat(checkpointer.metadata(step_dir / "state").item_metadata.tree["params"])
    wanted = _flat(abstract_params)
    mismatched = [f"{k} {tuple(stored[k].shape)} vs {tuple(wanted[k].shape)}"
                  for k in sorted(set(stored) & set(wanted))
                  if tuple(stored[k].shape) != tuple(wanted[k].shape)]
    if mismatched:
      raise UserInputError(
          f"init_from {step_dir} has {len(mismatched)} parameters of another shape "
          f"(checkpoint vs model): {'; '.join(mismatched[:4])}; use a checkpoint of the same "
          "architecture (model.* keys)")
    shared = sorted(set(stored) & set(wanted))
    if not shared:
      raise UserInputError(f"init_from {step_dir} shares no parameter with this model; is it "
                           "a bert_jax checkpoint of the same architecture?")
    target = _unflatten({k: wanted[k] for k in shared})
    restore_args = ocp.checkpoint_utils.construct_restore_args(target)
    restored = _flat(checkpointer.restore(step_dir / "state", args=ocp.args.PyTreeRestore(
        item={"params": target}, restore_args={"params": restore_args},
        partial_restore=True))["params"])
  fresh = sorted(set(wanted) - set(stored))
  logging.info("init_from %s: restored %d parameters; %d new (fresh init): %s", step_dir,
               len(shared), len(fresh), ", ".join(fresh[:10]))
  flat_params = _flat(params)
  flat_params.update(restored)
  return _unflatten(flat_params)


def _unflatten(flat):
  tree = {}
  for path, leaf in flat.items():
    node = tree
    *parents, name = path.split("/")
    for key in parents:
      node = node.setdefault(key, {})
    node[name] = leaf
  return tree
