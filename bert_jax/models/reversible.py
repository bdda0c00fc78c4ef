"""Reversible residual layers (Gomez et al. 2017) as the Reformer uses them, with a recomputing VJP.

A reversible layer maps two activation streams (x1, x2) to

    y1 = x1 + F(x2)      F: the attention half   (pre-LayerNorm attention, then dropout)
    y2 = x2 + G(y1)      G: the feed-forward half (pre-LayerNorm feed-forward, then dropout)

and can be run backwards exactly: x2 = y2 - G(y1), then x1 = y1 - F(x2). The backward pass of
`reversible_stack` therefore keeps only the last layer's outputs and rebuilds every layer's inputs
from them, one layer at a time, while it differentiates that layer: activation memory is one
layer's worth whatever the depth, at the price of running every half forward a second time.

Stream convention (the caller's, documented here for one place to look): the embedding output is
duplicated into (x, x) and the final (y1, y2) are averaged, as reformer-pytorch does, then a final
LayerNorm follows (pre-LN stacks need one). trax concatenates the two streams into width 2D
instead; averaging keeps width D so BERT's MLM head and its tied word embeddings fit unchanged.

The halves must be deterministic functions of (params, inputs, rngs): the backward pass calls
them again with the same per-layer rngs, so dropout masks and LSH hashes are the forward's.
Reconstruction by subtraction is exact in real arithmetic; in float32 it differs from stored
activations by rounding only (~1e-6 relative per layer), in bfloat16 correspondingly more.
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

# (layer_params, x_BLD, context, layer_rngs) -> [B, L, D]; context is non-differentiable
# (e.g. segment ids), layer_rngs a dict of PRNG keys (possibly empty).
HalfFn = Callable[[Any, jax.Array, Any, Any], jax.Array]


def make_reversible_stack(attend: HalfFn, feed_forward: HalfFn):
  """Builds ``stack(params_N, x1, x2, context, rngs_N) -> (y1, y2)`` over N reversible layers.

  Args:
    attend: the F half of a layer, given that layer's params and rngs.
    feed_forward: the G half of a layer.

  Returns:
    A function whose arguments are: params stacked on a leading layer axis (every leaf
    [N, ...]); the two input streams [B, L, D]; the context passed to both halves unchanged;
    rngs as a dict of keys stacked on a leading layer axis. Its gradient with respect to the
    params and both streams is computed by reconstruction, storing no per-layer activations.
  """

  def layer(carry, inputs, context):
    x1_BLD, x2_BLD = carry
    params, rngs = inputs
    y1_BLD = x1_BLD + attend(params, x2_BLD, context, rngs)
    y2_BLD = x2_BLD + feed_forward(params, y1_BLD, context, rngs)
    return (y1_BLD, y2_BLD), None

  def forward(params_N, x1_BLD, x2_BLD, context, rngs_N):
    (y1_BLD, y2_BLD), _ = jax.lax.scan(
      lambda c, i: layer(c, i, context), (x1_BLD, x2_BLD), (params_N, rngs_N)
    )
    return y1_BLD, y2_BLD

  @jax.custom_vjp
  def stack(params_N, x1_BLD, x2_BLD, context, rngs_N):
    return forward(params_N, x1_BLD, x2_BLD, context, rngs_N)

  def stack_fwd(params_N, x1_BLD, x2_BLD, context, rngs_N):
    y1_BLD, y2_BLD = forward(params_N, x1_BLD, x2_BLD, context, rngs_N)
    # Only the outputs are kept: everything earlier is rebuilt in stack_bwd.
    return (y1_BLD, y2_BLD), (params_N, y1_BLD, y2_BLD, context, rngs_N)

  def layer_backward(carry, inputs, context):
    y1_BLD, y2_BLD, dy1_BLD, dy2_BLD = carry
    params, rngs = inputs
    g_BLD, g_vjp = jax.vjp(lambda p, h: feed_forward(p, h, context, rngs), params, y1_BLD)
    x2_BLD = y2_BLD - g_BLD
    dparams_g, dy1_from_g_BLD = g_vjp(dy2_BLD)
    # y1 feeds both the output y1 and G, so its total cotangent is the sum.
    dy1_BLD = dy1_BLD + dy1_from_g_BLD
    f_BLD, f_vjp = jax.vjp(lambda p, h: attend(p, h, context, rngs), params, x2_BLD)
    x1_BLD = y1_BLD - f_BLD
    dparams_f, dx2_from_f_BLD = f_vjp(dy1_BLD)
    dparams = jax.tree.map(jnp.add, dparams_f, dparams_g)
    # x1 reaches the output only through y1; x2 through y2 and through F.
    return (x1_BLD, x2_BLD, dy1_BLD, dy2_BLD + dx2_from_f_BLD), dparams

  def stack_bwd(residuals, cotangents):
    params_N, y1_BLD, y2_BLD, context, rngs_N = residuals
    dy1_BLD, dy2_BLD = cotangents
    (_, _, dx1_BLD, dx2_BLD), dparams_N = jax.lax.scan(
      lambda c, i: layer_backward(c, i, context),
      (y1_BLD, y2_BLD, dy1_BLD, dy2_BLD),
      (params_N, rngs_N),
      reverse=True,
    )
    return dparams_N, dx1_BLD, dx2_BLD, None, None

  stack.defvjp(stack_fwd, stack_bwd)
  return stack
