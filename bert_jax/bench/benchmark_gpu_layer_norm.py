"""Layer norm's forward + backward on a GPU: XLA's against the Triton kernels, as JSON lines.

  python -m bert_jax.bench.benchmark_gpu_layer_norm --shapes=32768x768,16384x1024 \\
      --norm_launch=8/4/4/64/8

For each ``ROWSxWIDTH`` shape (bf16 input and output, float32 parameters and statistics, as a
BERT layer runs its norms; 32768x768 is BERT-base at 256 x 128, 16384x1024 BERT-large at
128 x 128), the median time of one forward + backward of: Flax's LayerNorm as XLA compiles it
(``xla_flax``, the unrolled model's), `layer_norm.normalize` compiled by XLA (``xla_custom_vjp``,
the scanned model's), and the Triton kernels (``triton``, ``model.layer_norm_kind='triton'``)
launched by default and as each ``--norm_launch`` says. Each kernel line also gives the largest
difference from Flax's output and input gradient. On a CPU the kernels run in Pallas interpret
mode, so the tool runs anywhere; only a GPU's times mean anything.
"""

import json

from absl import flags

from bert_jax.bench import step_timing
from bert_jax.cli import runner
from bert_jax.errors import UserInputError

_SHAPES = flags.DEFINE_list("shapes", ["32768x768", "16384x1024"], "ROWSxWIDTH shapes timed.")
_LAUNCH = flags.DEFINE_multi_string(
  "norm_launch",
  [],
  "Also time the kernels launched so: FORWARD_ROWS/FORWARD_WARPS/BACKWARD_ROWS/"
  "BACKWARD_ROWS_PER_PROGRAM/BACKWARD_WARPS, e.g. 8/4/4/64/8 (layer_norm_kernels.Launch).",
)
_REPEATS = flags.DEFINE_integer("norm_repeats", 20, "Timed repeats per shape (after 2 warm-ups).")

_EPSILON = 1e-12


def _shapes():
  shapes = []
  for text in _SHAPES.value:
    rows, sep, width = text.partition("x")
    if not (sep and rows.isdigit() and width.isdigit() and int(rows) and int(width)):
      raise UserInputError(f"--shapes: {text!r} is not ROWSxWIDTH (e.g. 32768x768)")
    shapes.append((int(rows), int(width)))
  return shapes


def main(argv):
  del argv
  shapes = _shapes()
  from bert_jax.models import layer_norm, layer_norm_kernels  # pylint: disable=g-import-not-at-top

  launches = [layer_norm_kernels.Launch.parse(text) for text in _LAUNCH.value]
  import flax.linen as nn  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  interpret = layer_norm.kernel_options("triton").interpret
  flax_norm = nn.LayerNorm(epsilon=_EPSILON, dtype=jnp.bfloat16, param_dtype=jnp.float32)

  def norms():
    """name -> f(x, scale, bias)."""
    found = {
      "xla_flax": lambda x, scale, bias: flax_norm.apply(
        {"params": {"scale": scale, "bias": bias}}, x
      ),
      "xla_custom_vjp": lambda x, scale, bias: layer_norm.normalize(
        x, scale, bias, _EPSILON, jnp.bfloat16, None
      ),
    }
    for launch in (None, *launches):
      options = layer_norm_kernels.Options(launch or layer_norm_kernels.Launch(), interpret)
      found["triton" + (f"[{launch}]" if launch else "")] = lambda x, scale, bias, options=options: (
        layer_norm.normalize(x, scale, bias, _EPSILON, jnp.bfloat16, options)
      )
    return found

  def timed(norm, x, scale, bias, d_y):
    """(median ms of one forward + backward, the output, the input gradient)."""

    @jax.jit
    def forward_backward(x, scale, bias, d_y):
      y, vjp = jax.vjp(norm, x, scale, bias)
      return y, vjp(d_y)[0]

    ms = step_timing.median_waited_ms(lambda: forward_backward(x, scale, bias, d_y), _REPEATS.value)
    return (ms, *forward_backward(x, scale, bias, d_y))

  for rows, width in shapes:
    keys = jax.random.split(jax.random.key(0), 4)
    x = (1.0 + jax.random.normal(keys[0], (rows, width))).astype(jnp.bfloat16)
    scale = 1.0 + 0.1 * jax.random.normal(keys[1], (width,))
    bias = 0.1 * jax.random.normal(keys[2], (width,))
    d_y = jax.random.normal(keys[3], (rows, width), jnp.bfloat16)
    reference = None
    for name, norm in norms().items():
      line = {"rows": rows, "width": width, "kind": name}
      try:
        ms, y, d_x = timed(norm, x, scale, bias, d_y)
        line["fwd_bwd_ms"] = round(ms, 4)
        if reference is None:
          reference = (y, d_x)
        else:
          for label, got, want in (("y", y, reference[0]), ("dx", d_x, reference[1])):
            error = jnp.max(jnp.abs(got.astype(jnp.float32) - want.astype(jnp.float32)))
            line[f"max_abs_error_{label}"] = float(error)
      except Exception as error:  # pylint: disable=broad-except
        line["error"] = str(error)[:300]
      print(json.dumps(line), flush=True)


if __name__ == "__main__":
  raise SystemExit(runner.run_absl(main))
