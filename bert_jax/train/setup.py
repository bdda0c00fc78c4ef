"""Builds the pieces of a run for a mesh: task, optimizer, state shapes/shardings, jitted steps.

`train_and_evaluate` and the tests share this, so what the tests check is what runs.
"""

import contextlib
import dataclasses
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from bert_jax.tasks.pretraining import PretrainingTask
from bert_jax.train import optimizer as optimizer_lib
from bert_jax.train import state as state_lib
from bert_jax.train import step as step_lib
from bert_jax.train.settings import RunSettings


@dataclasses.dataclass(frozen=True)
class Training:
  """Everything `train_and_evaluate` needs besides data, checkpoints and the loop."""
  task: Any
  optimizer: optax.GradientTransformation
  init_params: Callable
  abstract_state: Any
  state_shardings: Any
  train_step: Callable  # (state, batch, rng) -> (state, metric sums), jitted.
  eval_step: Callable  # (params, batch, rng) -> metric sums, jitted.


def make_task(settings: RunSettings):
  # NSP and SOP share the 2-way sentence head; objective "none" trains MLM alone.
  return PretrainingTask(settings.model, settings.data.max_seq_length,
                         settings.data.max_predictions_per_seq,
                         use_nsp=settings.data.objective != "none")


def build_training(settings: RunSettings, mesh) -> Training:
  """Traces shapes and shardings and jits the steps; call under the mesh and axis rules."""
  trainer = settings.trainer
  task = make_task(settings)
  optimizer = optimizer_lib.make_optimizer(settings.optimizer, trainer.num_train_steps)
  schedule = optimizer_lib.learning_rate_schedule(settings.optimizer, trainer.num_train_steps)
  example = task.example_batch(trainer.global_batch_size)

  def init_params(rng):
    inputs = task.model_inputs({k: jnp.asarray(v[:1]) for k, v in example.items()})
    return task.model(deterministic=True).init({"params": rng, "hashing": rng},
                                               *inputs)["params"]

  rules = settings.mesh.logical_axis_rules
  abstract_state, state_shardings = state_lib.abstract_state_and_shardings(
      init_params, optimizer, mesh, rules)
  train_step = step_lib.jit_train_step(task, optimizer, schedule,
                                       trainer.gradient_accumulation_steps, mesh, state_shardings,
                                       example)
  eval_step = step_lib.jit_eval_step(task, mesh, state_shardings.params, example)
  return Training(task=task, optimizer=optimizer, init_params=init_params,
                  abstract_state=abstract_state, state_shardings=state_shardings,
                  train_step=train_step, eval_step=eval_step)


@contextlib.contextmanager
def mesh_context(mesh, rules):
  """The mesh and logical axis rules that tracing the model needs, as one context."""
  with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    yield
