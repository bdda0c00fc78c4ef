"""cuDNN's fused attention beside bert_jax's dense attention on a GPU: JSON lines.

  python -m bert_jax.bench.benchmark_gpu_attention --points=256x128,64x512

First two checks on small inputs: cuDNN's output under a padding mask against XLA's
(``cudnn_mask_vs_xla``), and its dropout (``cudnn_dropout``), whose seed is a static integer:
does the mask change from one execution to the next, and does the backward pass drop what the
forward dropped? The output is linear in the values through the dropped probabilities, so
<out, d_out> equals <value, d_value> for any one mask (an H200 with JAX 0.11.2: 1.479 against
1.800, so no). Then, for each ``BATCHxSEQ``
point (12 heads of 64, bf16), the median time of forward + backward of: bert_jax's dense
attention and its flash kernels (Triton on a GPU), each with and without dropout 0.1, XLA's
`jax.nn.dot_product_attention`, cuDNN's with a boolean mask, with sequence lengths, and with
sequence lengths and dropout 0.1, and the flash kernels as the model runs them on a GPU (reading
a packed query/key/value array and its bias in place) with dropout, launched by default and,
for tuning, as each ``--flash_launch`` says. Where cuDNN is
missing (a CPU host) its lines carry the ``error`` instead, so the tool runs anywhere.
"""

import json

from absl import flags

from bert_jax.bench import step_timing
from bert_jax.cli import runner
from bert_jax.errors import UserInputError

_POINTS = flags.DEFINE_list("points", ["256x128", "64x512"], "BATCHxSEQ points timed.")
_FLASH_LAUNCH = flags.DEFINE_multi_string(
  "flash_launch",
  [],
  "Also time the packed flash kernels (dropout 0.1) launched so: FORWARD_BLOCK/FORWARD_WARPS/"
  "BACKWARD_BLOCK/BACKWARD_WARPS/STAGES, e.g. 128/4/64/8/3 (flash_launch.TritonLaunch).",
)
_REPEATS = flags.DEFINE_integer(
  "timed_repeats", 10, "Timed repeats per point (after two warm-ups)."
)

_HEADS, _HEAD_DIM, _DROPOUT = 12, 64, 0.1


def _emit(**fields):
  print(json.dumps(fields), flush=True)


def _points():
  points = []
  for text in _POINTS.value:
    batch, sep, seq = text.partition("x")
    if not (sep and batch.isdigit() and seq.isdigit() and int(batch) and int(seq) >= 8):
      raise UserInputError(f"--points: {text!r} is not BATCHxSEQ (e.g. 256x128, seq >= 8)")
    points.append((int(batch), int(seq)))
  return points


def _launches():
  """The ``--flash_launch`` settings, parsed before jax is imported so a typo fails at once."""
  from bert_jax.models.attention.flash_launch import (  # pylint: disable=g-import-not-at-top
    TritonLaunch,
  )

  return [TritonLaunch.parse(text) for text in _FLASH_LAUNCH.value]


def _inputs(batch, seq):
  """Random bf16 query, key and value, and segment ids whose last eighth is padding."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  keys = jax.random.split(jax.random.key(0), 3)
  shape = (batch, seq, _HEADS, _HEAD_DIM)
  query, key, value = (jax.random.normal(k, shape, jnp.bfloat16) for k in keys)
  segment_ids = jnp.ones((batch, seq), jnp.int32).at[:, seq - seq // 8 :].set(0)  # Padding.
  return query, key, value, segment_ids


def _lengths(segment_ids):
  """Each row's count of real (unpadded) tokens, as cuDNN's sequence lengths."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  return jnp.sum(segment_ids > 0, axis=1).astype(jnp.int32)


def _cudnn_dropout(lengths, seed):
  """cuDNN's attention with padding by sequence lengths and dropout under a static seed."""
  # The module jax.nn itself imports, so this import cannot fail where `import jax` worked.
  from jax._src.cudnn import (  # pylint: disable=g-import-not-at-top
    fused_attention_stablehlo as cudnn,
  )

  return lambda q, k, v: cudnn.dot_product_attention(
    q,
    k,
    v,
    q_seqlen=lengths,
    kv_seqlen=lengths,
    scale=_HEAD_DIM**-0.5,
    mask_type=cudnn.MaskType.PADDING,
    seed=seed,
    dropout_rate=_DROPOUT,
  )


def _check_cudnn_mask(query, key, value, segment_ids):
  """Emits cuDNN's largest error against XLA under a padding mask, on the unpadded rows."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  from bert_jax.models.attention import masks  # pylint: disable=g-import-not-at-top

  mask = masks.segment_mask(segment_ids, segment_ids)
  try:
    want = jax.nn.dot_product_attention(query, key, value, mask=mask, implementation="xla")
    got = jax.nn.dot_product_attention(query, key, value, mask=mask, implementation="cudnn")
    rows = (segment_ids > 0)[:, :, None, None]
    error = jnp.max(jnp.where(rows, jnp.abs(got.astype(jnp.float32) - want), 0.0))
    _emit(check="cudnn_mask_vs_xla", max_abs_error_unpadded=float(error))
  except Exception as error:  # pylint: disable=broad-except
    _emit(check="cudnn_mask_vs_xla", error=str(error)[:300])


def _check_cudnn_dropout(query, key, value, segment_ids):
  """Emits whether cuDNN's dropout mask changes between executions and backward matches it.

  The output is linear in the values through the dropped probabilities, so <out, d_out> equals
  <value, d_value> exactly when the backward pass drops what the forward pass dropped.
  """
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  lengths = _lengths(segment_ids)
  try:
    once = jax.jit(_cudnn_dropout(lengths, seed=42))

    @jax.jit
    def forward_and_backward_products(d_out):
      out, vjp = jax.vjp(lambda v: _cudnn_dropout(lengths, seed=42)(query, key, v), value)
      (d_value,) = vjp(d_out)
      f32 = jnp.float32
      return (
        jnp.sum(jnp.where(rows, out.astype(f32) * d_out.astype(f32), 0.0)),
        jnp.sum(jnp.where(rows, value.astype(f32) * d_value.astype(f32), 0.0)),
      )

    # Padding rows are left out: the kernel defines neither their outputs nor their gradients.
    rows = (segment_ids > 0)[:, :, None, None]
    d_out = jax.random.normal(jax.random.key(9), query.shape, jnp.bfloat16) * rows
    forward, backward = (float(x) for x in forward_and_backward_products(d_out))
    _emit(
      check="cudnn_dropout",
      mask_changes_between_executions=not bool(
        jnp.array_equal(once(query, key, value), once(query, key, value))
      ),
      out_dot_d_out=forward,
      value_dot_d_value=backward,
      backward_mask_is_forwards=abs(forward - backward) <= 1e-2 * abs(forward),
    )
  except Exception as error:  # pylint: disable=broad-except
    _emit(check="cudnn_dropout", error=str(error)[:300])


def _kinds_for(query, key, value, segment_ids, launches):
  """name -> (attention function, its differentiated inputs)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  from bert_jax.models.attention import (  # pylint: disable=g-import-not-at-top
    dense,
    flash,
    masks,
  )

  mask = masks.segment_mask(segment_ids, segment_ids)
  lengths = _lengths(segment_ids)
  rng = jax.random.key(1)
  qkv = (query, key, value)
  kinds = {
    "bert_jax_dense_dropout": lambda q, k, v: dense.dense_attention_vjp(
      q, k, v, segment_ids, dropout_rate=_DROPOUT, dropout_rng=rng
    ),
    "bert_jax_dense": lambda q, k, v: dense.dense_attention_vjp(q, k, v, segment_ids),
    "bert_jax_flash_dropout": lambda q, k, v: flash.flash_attention(
      q, k, v, segment_ids, dropout_rate=_DROPOUT, dropout_rng=rng
    ),
    "bert_jax_flash": lambda q, k, v: flash.flash_attention(q, k, v, segment_ids),
    "xla_fused": lambda q, k, v: jax.nn.dot_product_attention(
      q, k, v, mask=mask, implementation="xla"
    ),
    "cudnn_mask": lambda q, k, v: jax.nn.dot_product_attention(
      q, k, v, mask=mask, implementation="cudnn"
    ),
    "cudnn_lengths": lambda q, k, v: jax.nn.dot_product_attention(
      q, k, v, query_seq_lengths=lengths, key_value_seq_lengths=lengths, implementation="cudnn"
    ),
    "cudnn_lengths_dropout": _cudnn_dropout(lengths, seed=7),
  }
  kinds = {name: (attention, qkv) for name, attention in kinds.items()}
  # What the model runs on GPU: the packed projection (keys, values, queries) and its bias,
  # read in place, the gradient written packed.
  packed = (jnp.stack((key, value, query), axis=2), jnp.zeros((3, _HEADS, _HEAD_DIM)))
  for launch in (None, *launches):
    name = "bert_jax_flash_packed_dropout" + (f"[{launch}]" if launch else "")
    kinds[name] = (
      lambda p, b, launch=launch: flash.flash_attention_packed(
        p, segment_ids, bias_NHD=b, dropout_rate=_DROPOUT, dropout_rng=rng, launch=launch
      ),
      packed,
    )
  return kinds


def _time_point(batch, seq, launches):
  """Emits the median forward + backward time of every attention kind at one point."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  query, key, value, segment_ids = _inputs(batch, seq)
  kinds = _kinds_for(query, key, value, segment_ids, launches)
  for name, (attention, args) in kinds.items():
    step = jax.jit(
      jax.grad(
        lambda *a, f=attention: f(*a).astype(jnp.float32).sum(), argnums=tuple(range(len(args)))
      )
    )
    # A kind this host lacks (cuDNN on a CPU) prints its error and the others still run.
    try:
      ms = step_timing.median_waited_ms(lambda step=step, args=args: step(*args), _REPEATS.value)
      _emit(batch=batch, seq=seq, kind=name, fwd_bwd_ms=round(ms, 3))
    except Exception as error:  # pylint: disable=broad-except
      _emit(batch=batch, seq=seq, kind=name, error=str(error)[:300])


def main(argv):
  """Runs the two cuDNN checks on small inputs, then times each kind at each ``--points``.

  Args:
    argv: Leftover command-line arguments (unused).
  """
  del argv
  points = _points()
  launches = _launches()
  small = _inputs(4, 128)
  _check_cudnn_mask(*small)
  _check_cudnn_dropout(*small)
  for batch, seq in points:
    _time_point(batch, seq, launches)


if __name__ == "__main__":
  raise SystemExit(runner.run_absl(main))
