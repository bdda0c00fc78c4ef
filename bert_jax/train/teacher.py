"""The frozen teacher of ``task=distillation``: loaded sharded, fingerprinted, run forward only.

`attach` turns the student's `setup.Training` into a distillation run's:

- the teacher's parameters are restored once into the mesh with the same logical-axis rules
  as the student's (FSDP / tensor shards apply to it too), and are never in the train state,
  the optimizer state or a checkpoint;
- each train / eval step is one jitted program that first runs the teacher's forward pass on
  the batch and adds its outputs to the batch the student's ordinary step receives; the
  teacher's parameters are its argument (`steps_with_teacher`, which `tools/aot_compile`
  compiles with `abstract_params`: shapes from the teacher's config.json, no weights read);
- the checkpoint records the teacher's identity (its checkpoint path and a fingerprint of its
  parameter values), and resuming with another teacher is an error (`Checkpointer`);
- with ``distillation.student_init=every_other_layer`` a fresh student starts from the
  teacher: layer i from teacher layer 2i, embeddings and MLM head copied where shapes match
  (Sanh et al.), applied by `run_state.restore_or_initialize` below resume and ``init_from``.
"""

import dataclasses
import hashlib
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from absl import logging
from etils import epath
from flax import traverse_util

from bert_jax import workdir as workdir_lib
from bert_jax.errors import UserInputError
from bert_jax.parallel import sharding
from bert_jax.tasks.distillation import no_checkpoint_error
from bert_jax.train import compiler_options

# A teacher needs the parameters of its encoder and its masked-LM head; other heads of its
# pretraining model (NSP) are not used and may be absent (converted *ForMaskedLM models).
_NEEDED_PREFIXES = ("bert/", "mlm_head/")
_LAYER = re.compile(r"^bert/encoder/layer_(\d+)/")
_SCANNED = "bert/encoder/layers/"


def _stored_shapes(step_dir: epath.Path) -> dict:
  with ocp.Checkpointer(ocp.PyTreeCheckpointHandler()) as checkpointer:
    metadata = checkpointer.metadata(step_dir / workdir_lib.STATE_ITEM).item_metadata.tree
  return {
    path: tuple(leaf.shape)
    for path, leaf in traverse_util.flatten_dict(metadata["params"], sep="/").items()
  }


def _shapes_and_shardings(task, mesh, rules):
  """(ShapeDtypeStructs, NamedShardings) of the teacher's parameters, from its config."""
  ids = np.zeros((1, 2), np.int32)  # Host data: under an AOT compile's mesh nothing runs.
  model = task.teacher_model()
  boxed = jax.eval_shape(
    lambda: model.init({"params": jax.random.key(0), "hashing": jax.random.key(0)}, ids, ids, ids)
  )["params"]
  return sharding.strip_boxes(boxed), sharding.logical_shardings(boxed, mesh, rules)


def abstract_params(task, mesh, rules):
  """The teacher's parameters as ShapeDtypeStructs carrying their shardings, and the shardings.

  Only the teacher's config is read (no checkpoint): what an ahead-of-time compile passes.
  """
  shapes, shardings = _shapes_and_shardings(task, mesh, rules)
  abstract = jax.tree.map(
    lambda leaf, where: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=where),
    shapes,
    shardings,
  )
  return abstract, shardings


def load_params(task, mesh, rules):
  """The teacher's parameters, restored straight into their shardings on ``mesh``.

  Raises:
    UserInputError: the teacher has no checkpoint (only a config.json), or its checkpoint lacks
      encoder / MLM-head parameters the teacher's config implies, or holds them in another shape.
  """
  teacher = task.teacher
  if teacher.step_dir is None:
    raise no_checkpoint_error(task.settings.teacher)
  shapes, shardings = _shapes_and_shardings(task, mesh, rules)
  wanted = traverse_util.flatten_dict(shapes, sep="/")
  step_dir = epath.Path(teacher.step_dir)
  stored = _stored_shapes(step_dir)
  problems = [
    f"{path} {'missing' if path not in stored else f'of shape {stored[path]}, not {leaf.shape}'}"
    for path, leaf in sorted(wanted.items())
    if path.startswith(_NEEDED_PREFIXES) and stored.get(path) != tuple(leaf.shape)
  ]
  if problems:
    raise UserInputError(
      f"distillation.teacher {step_dir} does not fit the model of its config.json: "
      f"{len(problems)} parameters, e.g. {'; '.join(problems[:3])}; a teacher needs its encoder "
      "and masked-LM head (a pretraining run, or a converted *ForMaskedLM / *ForPreTraining)"
    )
  flat_shardings = traverse_util.flatten_dict(shardings, sep="/")
  present = {path: leaf for path, leaf in wanted.items() if path in stored}
  target = traverse_util.unflatten_dict(
    {
      path: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=flat_shardings[path])
      for path, leaf in present.items()
    },
    sep="/",
  )
  with ocp.Checkpointer(ocp.PyTreeCheckpointHandler()) as checkpointer:
    restored = checkpointer.restore(
      step_dir / workdir_lib.STATE_ITEM,
      args=ocp.args.PyTreeRestore(
        item={"params": target},
        restore_args={"params": ocp.checkpoint_utils.construct_restore_args(target)},
        partial_restore=True,
      ),
    )["params"]
  flat = traverse_util.flatten_dict(restored, sep="/")
  for path in sorted(set(wanted) - set(present)):  # Unused heads: zeros, never read.
    leaf = wanted[path]
    flat[path] = jax.device_put(np.zeros(leaf.shape, leaf.dtype), flat_shardings[path])
  return traverse_util.unflatten_dict(flat, sep="/"), shardings


def fingerprint(params, model_config) -> str:
  """A hash of the teacher's architecture and parameter values, the same on any mesh.

  Each parameter contributes two wrapping uint32 sums of its float32 bit patterns (plain and
  position-weighted): integer sums do not depend on the reduction order, so 1 device and 8
  sharded devices give the same value, and any changed bit or permuted element changes it.
  """

  def leaf_sums(x):
    bits = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32).reshape(-1)
    weights = jnp.arange(bits.size, dtype=jnp.uint32) * jnp.uint32(2654435761) + jnp.uint32(1)
    return jnp.stack([jnp.sum(bits), jnp.sum(bits * weights)])

  sums = jax.device_get(jax.jit(lambda p: jax.tree.map(leaf_sums, p))(params))
  digest = hashlib.sha256()
  digest.update(json.dumps(model_config.to_dict(), sort_keys=True).encode())
  for path, value in sorted(traverse_util.flatten_dict(sums, sep="/").items()):
    digest.update(f"{path}:{int(value[0])}:{int(value[1])};".encode())
  return digest.hexdigest()[:16]


def _teacher_path(student_path: str) -> str:
  match = _LAYER.match(student_path)
  if not match:
    return student_path
  return f"bert/encoder/layer_{2 * int(match.group(1))}/" + student_path[match.end() :]


def every_other_layer_map(student_shapes: dict, teacher_shapes: dict, teacher_layers: int):
  """{student path: (teacher path, stride slice or None)} for DistilBERT's initialisation.

  Student layer i takes teacher layer 2i; every other parameter (embeddings, MLM head, ...)
  takes the teacher's of the same name. Parameters the teacher lacks keep their fresh init.

  Raises:
    UserInputError: the teacher has too few layers, another layer layout (scanned or not), or
      a matching parameter of another shape.
  """
  mapping, problems = {}, []
  for path, shape in sorted(student_shapes.items()):
    source, stride = _teacher_path(path), None
    if path.startswith(_SCANNED):  # Stacked [layers, ...]: take rows 0, 2, 4, ...
      if source not in teacher_shapes or 2 * shape[0] - 1 > teacher_layers:
        problems.append(f"{path}: the teacher has {teacher_layers} layers, scanned or not")
        continue
      stride = slice(0, 2 * shape[0] - 1, 2)
      source_shape = (shape[0],) + tuple(teacher_shapes[source][1:])
    elif _LAYER.match(path) and source not in teacher_shapes:
      problems.append(f"{path}: the teacher has no {source}")
      continue
    elif source not in teacher_shapes:
      continue
    else:
      source_shape = tuple(teacher_shapes[source])
    if source_shape != tuple(shape):
      problems.append(f"{path} {tuple(shape)} vs teacher {source} {source_shape}")
      continue
    mapping[path] = (source, stride)
  if problems:
    raise UserInputError(
      f"distillation.student_init=every_other_layer cannot copy the teacher into this student "
      f"({len(problems)} problems, e.g. {'; '.join(problems[:2])}): give the student at most "
      "half the teacher's layers, its width and layer layout (scan_layers), or set "
      "distillation.student_init=scratch"
    )
  return mapping


def _student_init(teacher_params, teacher_layers: int, abstract_params, params_shardings):
  """params -> the student's params overlaid with the mapped teacher parameters (one jit)."""
  student_shapes = {
    p: tuple(x.shape) for p, x in traverse_util.flatten_dict(abstract_params, sep="/").items()
  }
  teacher_shapes = {
    p: tuple(x.shape) for p, x in traverse_util.flatten_dict(teacher_params, sep="/").items()
  }
  mapping = every_other_layer_map(student_shapes, teacher_shapes, teacher_layers)

  def overlay(student, teacher):
    flat, source = (
      traverse_util.flatten_dict(student, sep="/"),
      traverse_util.flatten_dict(teacher, sep="/"),
    )
    for path, (teacher_path, stride) in mapping.items():
      value = source[teacher_path]
      flat[path] = value if stride is None else value[stride]
    return traverse_util.unflatten_dict(flat, sep="/")

  overlay_jit = jax.jit(overlay, out_shardings=params_shardings)

  def init_overlay(params):
    logging.info(
      "student initialised from the teacher: %d of %d parameters (layer i <- teacher layer 2i)",
      len(mapping),
      len(student_shapes),
    )
    return overlay_jit(params, teacher_params)

  return init_overlay


def steps_with_teacher(training, teacher_shardings, mesh, batch_size: int):
  """The student's train and eval steps, each one program with the teacher's forward pass.

  Args:
    training: the student's `setup.Training` (its steps read the teacher's outputs from the
      batch).
    teacher_shardings: the teacher's parameter shardings (`load_params`, `abstract_params`).
    mesh: the device mesh.
    batch_size: the global batch size.

  Returns:
    (train_step(state, batch, teacher_params, rng) -> (state, metric sums) with the state
    donated, eval_step(params, batch, teacher_params, rng) -> metric sums), jitted; ``batch``
    holds the data pipeline's keys.
  """
  task = training.task
  batch_shardings = {
    k: sharding.batch_sharding(mesh, v.ndim) for k, v in task.data_example_batch(batch_size).items()
  }
  replicated = sharding.replicated(mesh)

  def with_outputs(batch, teacher_params):
    return {**batch, **task.teacher_outputs(teacher_params, batch)}

  # Named as the steps they wrap: XLA, profiles and compile logs see the programs by name.
  def train_step(state, batch, teacher_params, rng):
    return training.train_step(state, with_outputs(batch, teacher_params), rng)

  def eval_step(params, batch, teacher_params, rng):
    return training.eval_step(params, with_outputs(batch, teacher_params), rng)

  jitted_train_step = jax.jit(
    train_step,
    in_shardings=(training.state_shardings, batch_shardings, teacher_shardings, replicated),
    out_shardings=(training.state_shardings, replicated),
    donate_argnums=0,
    compiler_options=compiler_options.train_step(mesh.devices.flat[0].platform),
  )
  jitted_eval_step = jax.jit(
    eval_step,
    in_shardings=(training.state_shardings.params, batch_shardings, teacher_shardings, replicated),
    out_shardings=replicated,
  )
  return jitted_train_step, jitted_eval_step


def attach(training, settings, mesh):
  """The distillation form of ``training`` (a `setup.Training` of the distillation task).

  Args:
    training: the student's training, built for ``settings`` on ``mesh``.
    settings: the run settings.
    mesh: the device mesh (the teacher shares it).

  Returns:
    ``training`` whose train / eval steps run the teacher first, with the teacher's identity
    as the checkpoint record and, unless ``student_init=scratch``, the student's initialisation
    from the teacher.
  """
  task = training.task
  teacher_params, teacher_shardings = load_params(task, mesh, settings.mesh.logical_axis_rules)
  identity = {
    "path": task.teacher.step_dir,
    "fingerprint": fingerprint(teacher_params, task.teacher.model),
  }
  logging.info(
    "distillation teacher %s (fingerprint %s)", identity["path"], identity["fingerprint"]
  )
  train_with_teacher, eval_with_teacher = steps_with_teacher(
    training, teacher_shardings, mesh, settings.trainer.global_batch_size
  )

  def train_step(state, batch, rng):
    return train_with_teacher(state, batch, teacher_params, rng)

  def eval_step(params, batch, rng):
    return eval_with_teacher(params, batch, teacher_params, rng)

  init_overlay = None
  if settings.distillation.student_init == "every_other_layer":
    init_overlay = _student_init(
      teacher_params,
      task.teacher.model.num_layers,
      training.abstract_state.params,
      training.state_shardings.params,
    )
  return dataclasses.replace(
    training,
    train_step=train_step,
    eval_step=eval_step,
    init_overlay=init_overlay,
    checkpoint_record={"teacher": identity},
  )
