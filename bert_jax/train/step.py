"""Pure train and eval steps, and their jitted, sharded forms.

`train_step(state, batch, rng)` is a module-level pure function; the task, optimizer and
accumulation count are bound with `functools.partial` before it is jitted once.
"""

import functools

import jax
import jax.numpy as jnp
import optax

from bert_jax.parallel import sharding
from bert_jax.tasks.interface import PredictingTask, RecurrentTask, Task
from bert_jax.train import compiler_options
from bert_jax.train.state import TrainState

# Folded into the step key for the "sampling" stream (ELECTRA's generator samples); a constant
# far from split's counters, so the dropout and hashing keys stay what they were.
_SAMPLING_STREAM = 0x53414D50


def _rngs(rng):
  dropout_rng, hashing_rng = jax.random.split(rng)
  return {
    "dropout": dropout_rng,
    "hashing": hashing_rng,
    "sampling": jax.random.fold_in(rng, _SAMPLING_STREAM),
  }


def _split_microbatches(batch, accumulation_steps: int):
  """[B, ...] -> [A, B/A, ...]; micro-batch i takes every A-th row, so each stays sharded."""

  def split(x):
    x = x.reshape((x.shape[0] // accumulation_steps, accumulation_steps) + x.shape[1:])
    return jnp.swapaxes(x, 0, 1)

  return jax.tree.map(split, batch)


def _join_microbatches(tree):
  """The inverse of `_split_microbatches`: [A, B/A, ...] -> [B, ...] in the original row order."""

  def join(x):
    x = jnp.swapaxes(x, 0, 1)
    return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])

  return jax.tree.map(join, tree)


def train_step(
  state: TrainState,
  batch,
  rng,
  *,
  task: Task,
  optimizer: optax.GradientTransformation,
  schedule: optax.Schedule,
  accumulation_steps: int = 1,
):
  """One optimizer update on one global batch.

  Args:
    state: current train state.
    batch: dict of global arrays (leading dimension = global batch).
    rng: the run's base PRNG key; the step folds its own number in, so a resumed run draws
      the same dropout masks as an uninterrupted one.
    task: the objective (`loss_and_sums`, `denominators`, `model`, `model_inputs`); a
      `RecurrentTask` when ``state`` carries memory.
    optimizer: optax transformation.
    schedule: learning-rate schedule, for the metric only.
    accumulation_steps: micro-batches per update; gradients are summed, normalised once.

  Returns:
    (new state, dict of metric sums plus ``grad_norm``, ``learning_rate``, ``finite``).
  """
  model = task.model(deterministic=False)
  denominators = task.denominators(batch)
  step_rng = jax.random.fold_in(rng, state.step)
  # Segment-level recurrence: the memory the previous step left (None for other models).
  memory = getattr(state, "memory", None)

  def loss_fn(params, micro_batch, micro_memory, micro_rng):
    extra = {} if micro_memory is None else task.memory_inputs(micro_memory)
    outputs = model.apply(
      {"params": params}, *task.model_inputs(micro_batch), **extra, rngs=_rngs(micro_rng)
    )
    loss, sums = task.loss_and_sums(outputs, micro_batch, denominators)
    new_memory = None if micro_memory is None else task.next_memory(outputs, micro_memory)
    return loss, (sums, new_memory)

  def loss_sums_grads(params, micro_batch, micro_memory, micro_rng):
    (loss, (sums, new_memory)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
      params, micro_batch, micro_memory, micro_rng
    )
    return (loss, sums, grads), new_memory

  if accumulation_steps == 1:
    (loss, sums, grads), memory = loss_sums_grads(state.params, batch, memory, step_rng)
  else:
    # Each micro-batch's rows carry their own rows' memory, split the same way.
    micro_batches, micro_memories = _split_microbatches((batch, memory), accumulation_steps)
    micro_rngs = jax.random.split(step_rng, accumulation_steps)

    def accumulate(carry, inputs):
      totals, new_memory = loss_sums_grads(state.params, *inputs)
      return jax.tree.map(jnp.add, carry, totals), new_memory

    first = jax.tree.map(lambda x: x[0], (micro_batches, micro_memories, micro_rngs))
    zeros = jax.tree.map(
      lambda s: jnp.zeros(s.shape, s.dtype),
      jax.eval_shape(loss_sums_grads, state.params, *first)[0],
    )
    (loss, sums, grads), micro_memories = jax.lax.scan(
      accumulate, zeros, (micro_batches, micro_memories, micro_rngs)
    )
    memory = _join_microbatches(micro_memories)

  grad_norm = optax.tree.norm(grads)
  updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
  new_state = state.replace(
    step=state.step + 1, params=optax.apply_updates(state.params, updates), opt_state=opt_state
  )
  if memory is not None:
    new_state = new_state.replace(memory=memory)
  metrics = dict(
    sums,
    grad_norm=grad_norm,
    learning_rate=schedule(state.step),
    finite=jnp.isfinite(loss) & jnp.isfinite(grad_norm),
  )
  return new_state, metrics


def eval_step(params, batch, rng, *, task: Task):
  """Metric sums of the deterministic model on one global batch."""
  model = task.model(deterministic=True)
  outputs = model.apply({"params": params}, *task.model_inputs(batch), rngs=_rngs(rng))
  _, sums = task.loss_and_sums(outputs, batch, task.denominators(batch))
  return sums


def recurrent_eval_step(params, batch, memory, rng, *, task: RecurrentTask):
  """`eval_step` with segment memory: (metric sums, the memory for the next segment).

  The model keeps ``task.eval_mem_len`` positions, the length of ``memory``.
  """
  model = task.model(deterministic=True, mem_len=task.eval_mem_len)
  outputs = model.apply(
    {"params": params}, *task.model_inputs(batch), **task.memory_inputs(memory), rngs=_rngs(rng)
  )
  _, sums = task.loss_and_sums(outputs, batch, task.denominators(batch))
  return sums, task.next_memory(outputs, memory)


def predict_step(params, batch, rng, *, task: PredictingTask):
  """Metric sums and per-row predictions (with each row's ``row_id``) on one global batch."""
  model = task.model(deterministic=True)
  outputs = model.apply({"params": params}, *task.model_inputs(batch), rngs=_rngs(rng))
  _, sums = task.loss_and_sums(outputs, batch, task.denominators(batch))
  return sums, dict(task.predictions(outputs, batch), row_id=batch["row_id"])


def jit_train_step(
  task: Task, optimizer, schedule, accumulation_steps, mesh, state_shardings, batch_example
):
  """`train_step` jitted with explicit in/out shardings, the state donated, and the platform's
  XLA options (`compiler_options`)."""
  batch_shardings = {k: sharding.batch_sharding(mesh, v.ndim) for k, v in batch_example.items()}
  step = functools.partial(
    train_step,
    task=task,
    optimizer=optimizer,
    schedule=schedule,
    accumulation_steps=accumulation_steps,
  )
  return jax.jit(
    step,
    in_shardings=(state_shardings, batch_shardings, sharding.replicated(mesh)),
    out_shardings=(state_shardings, sharding.replicated(mesh)),
    donate_argnums=0,
    compiler_options=compiler_options.train_step(mesh.devices.flat[0].platform),
  )


def jit_eval_step(task: Task, mesh, params_shardings, batch_example):
  """`eval_step` jitted with explicit shardings (metric sums come back replicated)."""
  batch_shardings = {k: sharding.batch_sharding(mesh, v.ndim) for k, v in batch_example.items()}
  return jax.jit(
    functools.partial(eval_step, task=task),
    in_shardings=(params_shardings, batch_shardings, sharding.replicated(mesh)),
    out_shardings=sharding.replicated(mesh),
  )


def jit_recurrent_eval_step(
  task: RecurrentTask, mesh, params_shardings, memory_shardings, batch_example
):
  """`recurrent_eval_step` jitted; the memory stays sharded like the batch, the memory it
  reads is donated to the one it returns."""
  batch_shardings = {k: sharding.batch_sharding(mesh, v.ndim) for k, v in batch_example.items()}
  return jax.jit(
    functools.partial(recurrent_eval_step, task=task),
    in_shardings=(params_shardings, batch_shardings, memory_shardings, sharding.replicated(mesh)),
    out_shardings=(sharding.replicated(mesh), memory_shardings),
    donate_argnums=2,
  )


def jit_predict_step(task: PredictingTask, mesh, params_shardings, batch_example):
  """`predict_step` jitted; sums and predictions come back replicated, so every host holds
  every row of the global batch (the gather across hosts happens inside the program)."""
  batch_shardings = {k: sharding.batch_sharding(mesh, v.ndim) for k, v in batch_example.items()}
  return jax.jit(
    functools.partial(predict_step, task=task),
    in_shardings=(params_shardings, batch_shardings, sharding.replicated(mesh)),
    out_shardings=sharding.replicated(mesh),
  )
