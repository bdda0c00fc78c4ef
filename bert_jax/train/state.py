"""The train state and its sharded initialisation (never materialised on one device)."""

import functools
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import optax

from bert_jax.parallel import sharding
from bert_jax.train import compiler_options


class TrainState(flax.struct.PyTreeNode):
  """Everything a train step updates: step counter, parameters, optimizer state."""

  step: jax.Array
  params: Any
  opt_state: Any


class RecurrentTrainState(TrainState):
  """The train state of a model with segment memory (Transformer-XL / XLNet causal LM).

  ``memory`` is what the next step attends to besides its own segment: ``{"hidden": one
  [B, mem_len, D] array per layer, "ids": [B, mem_len] document ids}``, sharded like the
  activations (batch over the data-parallel axes). Models without memory keep `TrainState`,
  so their checkpoints hold exactly what they held before.
  """

  memory: Any


# Jitted, with the run's functions as static arguments, so that jax traces a run's init once:
# `abstract_state_and_shardings` traces it for the shapes, and `init_state`'s jit finds the same
# trace in jax's cache instead of tracing the model again.
@functools.partial(jax.jit, static_argnames=("init_params", "optimizer", "init_memory"))
def _boxed_state(init_params: Callable[[jax.Array], Any], optimizer, rng, init_memory=None):
  params = init_params(rng)
  fields = dict(step=jnp.zeros((), jnp.int32), params=params, opt_state=optimizer.init(params))
  if init_memory is None:
    return TrainState(**fields)
  return RecurrentTrainState(**fields, memory=init_memory())


def abstract_state_and_shardings(
  init_params, optimizer: optax.GradientTransformation, mesh, rules, init_memory=None
):
  """Shapes and shardings of the train state, from `jax.eval_shape` alone.

  Args:
    init_params: rng -> params tree with logical-axis boxes (e.g. a module's init).
    optimizer: the optax transformation (its state inherits the params' logical axes).
    mesh: the device mesh.
    rules: logical axis rules.
    init_memory: () -> the first segment's memory with logical-axis boxes; None = a model
      without memory (a plain `TrainState`).

  Returns:
    (abstract unboxed `TrainState` with shardings attached, tree of `NamedSharding`s).
  """
  # An abstract key: nothing runs eagerly, so this also works on a mesh of devices that can only
  # be compiled for (TPU topologies on a CPU host, tools/aot_compile.py). Replicated on the mesh,
  # as `init_state` passes it, so that its jit finds this trace.
  key = jax.eval_shape(lambda: jax.random.key(0))
  boxed = _boxed_state.eval_shape(
    init_params=init_params,
    optimizer=optimizer,
    rng=jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=sharding.replicated(mesh)),
    init_memory=init_memory,
  )
  shardings = sharding.logical_shardings(boxed, mesh, rules)
  abstract = jax.tree.map(
    lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
    sharding.strip_boxes(boxed),
    shardings,
  )
  return abstract, shardings


def init_state(init_params, optimizer, rng, shardings, init_memory=None) -> TrainState:
  """Initialises the train state directly into its shardings with one jitted call (with the
  empty memory of ``init_memory`` when given, see `abstract_state_and_shardings`). ``rng`` is
  replicated on the shardings' mesh, as `abstract_state_and_shardings` traced it."""

  def init(key):
    return nn.unbox(
      _boxed_state(init_params=init_params, optimizer=optimizer, rng=key, init_memory=init_memory)
    )

  mesh = jax.tree.leaves(shardings)[0].mesh
  options = compiler_options.init(mesh.devices.flat[0].platform)
  return jax.jit(
    init,
    in_shardings=sharding.replicated(mesh),
    out_shardings=shardings,
    compiler_options=options,
  )(rng)
