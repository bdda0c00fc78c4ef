"""One jitted forward+backward of an attention layer or encoder, for the timing tools.

Kept free of flags so `benchmark_attention` and `benchmark_reformer_pytorch` can share it.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp


def layer_forward_backward(module, shape):
  """Initialises ``module`` on random [batch, length, d_model] inputs (no padding).

  Returns:
    A callable running one jitted forward+backward (grads w.r.t. params and input) to
    completion; the first call compiles.
  """
  x_BLD = jax.random.normal(jax.random.key(0), shape, jnp.float32)
  segment_ids_BL = jnp.ones(shape[:2], jnp.int32)
  rngs = {"params": jax.random.key(1), "hashing": jax.random.key(2)}
  params = nn.unbox(jax.jit(module.init)(rngs, x_BLD, segment_ids_BL)["params"])

  @jax.jit
  def forward_backward(params, x_BLD):
    def loss(params, x_BLD):
      out_BLD = module.apply(
        {"params": params}, x_BLD, segment_ids_BL, rngs={"hashing": jax.random.key(3)}
      )
      return jnp.sum(out_BLD.astype(jnp.float32) ** 2)

    return jax.grad(loss, argnums=(0, 1))(params, x_BLD)

  return lambda: jax.block_until_ready(forward_backward(params, x_BLD))
