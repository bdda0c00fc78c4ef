"""Builds the pieces of a run for a mesh: task, optimizer, state shapes/shardings, jitted steps.

`train_and_evaluate` and the tests share this, so what the tests check is what runs.
"""

import contextlib
import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from bert_jax import names
from bert_jax.parallel import sharding
from bert_jax.tasks import registry
from bert_jax.tasks.interface import Task
from bert_jax.train import optimizer as optimizer_lib
from bert_jax.train import state as state_lib
from bert_jax.train import step as step_lib
from bert_jax.train import teacher as teacher_lib
from bert_jax.train.settings import RunSettings


@dataclasses.dataclass(frozen=True)
class Training:
  """Everything `train_and_evaluate` needs besides data, checkpoints and the loop."""

  task: Task
  optimizer: optax.GradientTransformation
  init_params: Callable
  abstract_state: Any
  state_shardings: Any
  train_step: Callable  # (state, batch, rng) -> (state, metric sums), jitted.
  # (params, batch, rng) -> metric sums, jitted; with ``init_eval_memory``: (params, batch,
  # memory, rng) -> (metric sums, next memory).
  eval_step: Callable
  # (params, batch, rng) -> (metric sums, per-row predictions + row_id), jitted; None for
  # a task that does not predict (``task.predicts`` False: pretraining).
  predict_step: Callable | None = None
  # params -> params, applied to a fresh state below resume and init_from (distillation: the
  # student from the teacher's layers, `train/teacher.py`); None = keep the random init.
  init_overlay: Callable | None = None
  # JSON-able facts every checkpoint records and a resume must match (the teacher's identity,
  # a causal LM's rows and segment length).
  checkpoint_record: dict | None = None
  # () -> the train state's empty memory (boxed), for models with segment memory; else None.
  init_memory: Callable | None = None
  # () -> a fresh, sharded eval memory (eval reads its streams from their start); None when
  # evaluation runs without memory.
  init_eval_memory: Callable | None = None


def make_task(settings: RunSettings, data=None) -> Task:
  """The task object (see `bert_jax.tasks.registry.make_task`)."""
  return registry.make_task(settings.task_settings, data)


def _frozen_params_mask(params):
  """True for the shared "bert" trunk, False for the task heads."""
  return {
    name: jax.tree.map(lambda _, n=name: n == "bert", subtree) for name, subtree in params.items()
  }


def make_optimizer(settings: RunSettings) -> optax.GradientTransformation:
  """The configured optimizer; with ``freeze_encoder`` it leaves the encoder untouched.

  Frozen parameters get exactly zero updates (feature-based use: the head learns on fixed
  pretrained features). Their gradients are zeroed before the optimizer, so clipping sees the
  head's alone, and their updates after it, so weight decay does not move them either.
  """
  optimizer = optimizer_lib.make_optimizer(settings.optimizer, settings.trainer.num_train_steps)
  if not settings.trainer.freeze_encoder:
    return optimizer
  return optax.chain(
    optax.masked(optax.set_to_zero(), _frozen_params_mask),
    optimizer,
    optax.masked(optax.set_to_zero(), _frozen_params_mask),
  )


def build_training(settings: RunSettings, mesh, data=None, *, load_teacher=True) -> Training:
  """Traces shapes and shardings and jits the steps; call under the mesh and axis rules.

  Args:
    settings: the run settings (step counts resolved, see `settings.resolve_train_steps`).
    mesh: the device mesh.
    data: the task's data object; fine-tuning tasks are sized from it.
    load_teacher: False leaves a distillation run's student alone, its steps reading the
      teacher's outputs from the batch, and reads no teacher weights (`tools/aot_compile` adds
      the teacher's forward pass with abstract parameters, `teacher.steps_with_teacher`).
  """
  trainer = settings.trainer
  task = make_task(settings, data)
  optimizer = make_optimizer(settings)
  schedule = optimizer_lib.learning_rate_schedule(settings.optimizer, trainer.num_train_steps)
  example = task.example_batch(trainer.global_batch_size)

  def init_params(rng):
    inputs = task.model_inputs({k: jnp.asarray(v[:1]) for k, v in example.items()})
    return task.model(deterministic=True).init({"params": rng, "hashing": rng}, *inputs)["params"]

  rules = settings.mesh.logical_axis_rules
  init_memory = _memory_init(task, trainer.global_batch_size, task.mem_len)
  abstract_state, state_shardings = state_lib.abstract_state_and_shardings(
    init_params, optimizer, mesh, rules, init_memory
  )
  train_step = step_lib.jit_train_step(
    task, optimizer, schedule, trainer.gradient_accumulation_steps, mesh, state_shardings, example
  )
  eval_step = step_lib.jit_eval_step(task, mesh, state_shardings.params, example)
  init_eval_memory = None
  init_boxed_eval_memory = _memory_init(task, trainer.global_batch_size, task.eval_mem_len)
  if init_boxed_eval_memory is not None:
    memory_shardings = sharding.logical_shardings(
      jax.eval_shape(init_boxed_eval_memory), mesh, rules
    )
    init_eval_memory = jax.jit(
      lambda: nn.unbox(init_boxed_eval_memory()), out_shardings=memory_shardings
    )
    eval_step = step_lib.jit_recurrent_eval_step(
      task, mesh, state_shardings.params, memory_shardings, example
    )
  predict_step = (
    step_lib.jit_predict_step(task, mesh, state_shardings.params, example)
    if task.predicts
    else None
  )
  training = Training(
    task=task,
    optimizer=optimizer,
    init_params=init_params,
    abstract_state=abstract_state,
    state_shardings=state_shardings,
    train_step=train_step,
    eval_step=eval_step,
    predict_step=predict_step,
    checkpoint_record=task.checkpoint_record(trainer.global_batch_size),
    init_memory=init_memory,
    init_eval_memory=init_eval_memory,
  )
  if trainer.task == names.DISTILLATION and load_teacher:
    return teacher_lib.attach(training, settings, mesh)
  return training


def _memory_init(task: Task, batch_size: int, mem_len: int):
  """() -> ``task``'s boxed empty memory of ``mem_len`` positions (``task.mem_len`` or
  ``task.eval_mem_len``, > 0 only for an `interface.RecurrentTask`), or None for a length of 0
  (no recurrence)."""
  if not mem_len:
    return None
  return functools.partial(task.init_memory, batch_size, mem_len)


@dataclasses.dataclass(frozen=True)
class RandomStepInputs:
  """What running or compiling a train step needs without data.

  Attributes:
    state: a freshly initialised train state, in its shardings (a causal LM's with its empty
      memory, as a step in training attends to).
    host_batch: the task's random batch, as numpy arrays on the host.
    batch: the same batch as global arrays on the mesh.
    rng: the dropout key, replicated.
  """

  state: Any
  host_batch: dict
  batch: dict
  rng: Any


def fresh_state(training: Training):
  """``training``'s randomly initialised train state (parameter key 0) in its shardings, with
  the empty memory of a model that has one; call under `mesh_context`."""
  return state_lib.init_state(
    training.init_params,
    training.optimizer,
    jax.random.key(0),
    training.state_shardings,
    training.init_memory,
  )


def random_step_inputs(training: Training, mesh, batch_size: int, key_impl=None):
  """`RandomStepInputs` for ``training``'s step (the benchmarks, compile checks); call under
  `mesh_context`. ``key_impl`` is the dropout key's PRNG implementation (default jax's).
  ``training.task`` is an `interface.RandomBatchTask` (a pretraining objective)."""
  host_batch = training.task.random_batch(batch_size)
  return RandomStepInputs(
    state=fresh_state(training),
    host_batch=host_batch,
    batch=sharding.host_batch_to_global(host_batch, mesh),
    rng=jax.device_put(jax.random.key(1, impl=key_impl), sharding.replicated(mesh)),
  )


@contextlib.contextmanager
def mesh_context(mesh, rules):
  """The mesh and logical axis rules that tracing the model needs, as one context."""
  with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    yield
