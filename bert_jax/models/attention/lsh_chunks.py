"""Attention inside the sorted chunks of ``lsh_attention``: a blocked kernel with its own VJP.

Every chunk of ``chunk_len`` sorted slots attends to a window of chunks around it (cyclic over
all rounds laid end to end). The kernel returns each slot's output and log-sum-exp; the caller
combines the hash rounds. It loops over blocks of a few chunks and never builds a tensor of all
the windows' logits (or of the windowed keys and values), so the logits, probabilities and
their gradients of a block stay in cache and memory is linear in length with a small constant.
The backward pass recomputes a block's logits from the saved per-query max and sum, as flash
attention does, rather than storing probabilities. Keys are the length-normalised queries,
normalised window by window inside the loop, and a slot's query and key gradients go into one
accumulator; the largest arrays are the ring-padded queries and values (the sequence plus the
window's reach on either side, cyclically) and their two gradient accumulators.

Inside a block:

- Logits are keys-major, [.., K, Q]: both products that contract over the window (probabilities
  x values forward, logit gradients x keys backward) then contract over the second-minor axis
  of the big operand, the form XLA:CPU multiplies fastest.
- Masks and duplicate counts come from per-slot integers; nothing of their size is stored.
- The duplicate correction multiplies exp(logit - max) by 1 / count instead of subtracting
  log(count) from the logit: the same softmax, one division instead of a logarithm per entry.
- The softmax gradient uses sum_k p_k dp_k = <d out, out>, a per-query product, instead of a
  second pass over [K, Q]; 1 / sum and the logit scale are per-query factors.
"""

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bert_jax.models.attention import lsh_ring, masks
from bert_jax.models.attention.lsh_hashing import NORM_EPSILON

# Chunks per loop step are chosen so a step's [.., K, Q] logits hold about this many values
# (1 MB in float32): large enough to amortise a step, small enough to stay in cache.
_BLOCK_VALUES = 1 << 18


class ChunkSpec(NamedTuple):
  """Static shape of the windows and masking rules of `attend_chunks` (hashable).

  Attributes:
    chunk_len: slots per chunk.
    n_chunks_before: chunks before a query's chunk in its window.
    n_chunks_after: chunks after it.
    causal: forbid keys at later original positions than the query.
    mask_across_buckets: forbid keys whose bucket differs from the query's.
    self_mask_value: added to the logit of a query's own position.
    round_shifts: with duplicate counting, the round differences (key round - query round,
      modulo the number of rounds) whose appearances can share a window; empty without it.
  """

  chunk_len: int
  n_chunks_before: int
  n_chunks_after: int
  causal: bool
  mask_across_buckets: bool
  self_mask_value: float
  round_shifts: tuple

  @property
  def window(self):
    return self.n_chunks_before + 1 + self.n_chunks_after


class _Block:
  """Slices of one loop step: the queries of `n_block` chunks and their windows' keys."""

  def __init__(self, step, n_block, spec):
    self.n_block, self.spec = n_block, spec
    self.query_start = step * n_block * spec.chunk_len

  def queries(self, x_BHS, padded=False):
    """[B, H, S, ...] (or ring-padded [B, H, P, ...]) -> [B, H, G, Q, ...] for this step."""
    rows = self.n_block * self.spec.chunk_len
    start = self.query_start + (self.spec.n_chunks_before * self.spec.chunk_len if padded else 0)
    x_BHR = jax.lax.dynamic_slice_in_dim(x_BHS, start, rows, axis=2)
    return x_BHR.reshape(x_BHR.shape[:2] + (self.n_block, self.spec.chunk_len) + x_BHR.shape[3:])

  def windows(self, x_BHP):
    """Ring-padded [B, H, P, ...] -> [B, H, G, W*Q, ...]: each chunk's window, in order."""
    n_chunks = self.n_block + self.spec.window - 1
    x_BHR = jax.lax.dynamic_slice_in_dim(
      x_BHP, self.query_start, n_chunks * self.spec.chunk_len, axis=2
    )
    x_BHCQ = x_BHR.reshape(x_BHR.shape[:2] + (n_chunks, self.spec.chunk_len) + x_BHR.shape[3:])
    return jnp.concatenate(
      [x_BHCQ[:, :, t : t + self.n_block] for t in range(self.spec.window)], axis=3
    )

  def add_windows(self, acc_BHP, x_BHGK, own_BHGQ=None):
    """Transpose of `windows` (plus, optionally, of `queries(padded=True)`): adds
    [B, H, G, W*Q, ...] window rows (and [B, H, G, Q, ...] own-chunk rows) into acc."""
    spec = self.spec
    q = spec.chunk_len
    parts = [x_BHGK[:, :, :, t * q : (t + 1) * q] for t in range(spec.window)]
    if own_BHGQ is not None:
      parts[spec.n_chunks_before] = parts[spec.n_chunks_before] + own_BHGQ
    pad = [(0, 0)] * parts[0].ndim
    padded = []
    for t, part in enumerate(parts):
      pad[2] = (t, spec.window - 1 - t)
      padded.append(jnp.pad(part, pad))
    update_BHCQ = sum(padded[1:], padded[0])
    update_BHR = update_BHCQ.reshape(update_BHCQ.shape[:2] + (-1,) + update_BHCQ.shape[4:])
    current_BHR = jax.lax.dynamic_slice_in_dim(
      acc_BHP, self.query_start, update_BHR.shape[2], axis=2
    )
    return jax.lax.dynamic_update_slice_in_dim(
      acc_BHP, current_BHR + update_BHR, self.query_start, axis=2
    )

  def put_queries(self, acc_BHS, x_BHGQ):
    """Writes [B, H, G, Q, ...] over this step's query rows."""
    x_BHR = x_BHGQ.reshape(x_BHGQ.shape[:2] + (-1,) + x_BHGQ.shape[4:])
    return jax.lax.dynamic_update_slice_in_dim(acc_BHS, x_BHR, self.query_start, axis=2)


def _keys(x_BHGK):
  return x_BHGK[..., :, None]


def _queries(x_BHGQ):
  return x_BHGQ[..., None, :]


def _masked_logits(logits_BHGKQ, q_slots, k_slots, spec):
  """Self, padding, causal and bucket rules on keys-major logits (float32)."""
  is_self_BHGKQ = _keys(k_slots["pos"]) == _queries(q_slots["pos"])
  logits_BHGKQ = jnp.where(is_self_BHGKQ, logits_BHGKQ + spec.self_mask_value, logits_BHGKQ)
  # Padding keys carry segment -1, so one comparison covers "same segment, key not padding".
  allowed_BHGKQ = _keys(k_slots["seg"]) == _queries(q_slots["seg"])
  if spec.causal:
    allowed_BHGKQ &= _keys(k_slots["pos"]) <= _queries(q_slots["pos"])
  if spec.mask_across_buckets:
    allowed_BHGKQ &= _keys(k_slots["bucket"]) == _queries(q_slots["bucket"])
  return jnp.where(allowed_BHGKQ, logits_BHGKQ, masks.large_negative(jnp.float32))


def _inverse_counts(q_slots, k_slots, spec):
  """1 / (times each window key appears, unmasked, in the query's windows of all rounds).

  ``loc{m}`` is the chunk a key slot's position occupies in round m, and ``target{n}_{t}`` the
  t-th chunk of a query slot's round-n window: a key's appearance in round n + shift lands in
  the query's round-n window once per equal window chunk.
  """
  n_hashes = sum(name.startswith("loc") for name in k_slots)
  counts_BHGKQ = 0
  for n in range(n_hashes):
    same_bucket_BHGKQ = None
    if spec.mask_across_buckets:
      # Only shift 0 is counted then: other rounds' buckets never match.
      same_bucket_BHGKQ = _keys(k_slots[f"round_bucket{n}"]) == _queries(
        q_slots[f"round_bucket{n}"]
      )
    for shift in spec.round_shifts:
      key_loc_BHGK1 = _keys(k_slots[f"loc{(n + shift) % n_hashes}"])
      for t in range(spec.window):
        hit_BHGKQ = key_loc_BHGK1 == _queries(q_slots[f"target{n}_{t}"])
        if same_bucket_BHGKQ is not None:
          hit_BHGKQ &= same_bucket_BHGKQ
        counts_BHGKQ = counts_BHGKQ + hit_BHGKQ.astype(jnp.int32)
  # Masked entries may count 0; the floor of 1 keeps them finite (their weight is 0 anyway).
  return 1.0 / jnp.maximum(counts_BHGKQ, 1).astype(jnp.float32)


class _Inputs(NamedTuple):
  """Ring-padded loop inputs (see `_prepare`); also the forward pass's residuals."""

  query_BHPD: jax.Array
  value_BHPD: jax.Array
  inv_norm_BHP: jax.Array  # 1 / |query|: keys are query * inv_norm.
  query_slots_BHP: dict  # Per-slot integers as a query sees them.
  key_slots_BHP: dict  # Per-slot integers as a key sees them (padding segment -1).


def _window_keys(block, inputs):
  """The length-normalised queries of each chunk's window: its keys, float32."""
  return (
    block.windows(inputs.query_BHPD).astype(jnp.float32)
    * block.windows(inputs.inv_norm_BHP)[..., None]
  )


def _block_exp(block, inputs, spec, max_BHS=None):
  """exp(masked logit - max) / count for one block, keys-major, and the max it used.

  Args:
    block: the `_Block` of this step.
    inputs: the `_Inputs`.
    spec: the `ChunkSpec`.
    max_BHS: the forward pass's per-query max, to recompute exactly its exponentials; None
      computes it.

  Returns:
    (exp [B, H, G, K, Q] float32, max [B, H, G, Q]).
  """
  query_BHGQD = block.queries(inputs.query_BHPD, padded=True)
  key_BHGKD = _window_keys(block, inputs).astype(query_BHGQD.dtype)
  q_slots = {name: block.queries(x, padded=True) for name, x in inputs.query_slots_BHP.items()}
  k_slots = {name: block.windows(x) for name, x in inputs.key_slots_BHP.items()}
  logits_BHGKQ = jnp.einsum(
    "bhgkd,bhgqd->bhgkq", key_BHGKD, query_BHGQD, preferred_element_type=jnp.float32
  ) * (1.0 / math.sqrt(query_BHGQD.shape[-1]))
  logits_BHGKQ = _masked_logits(logits_BHGKQ, q_slots, k_slots, spec)
  if max_BHS is None:
    max_BHGQ = jnp.max(logits_BHGKQ, axis=-2)
  else:
    max_BHGQ = block.queries(max_BHS)
  exp_BHGKQ = jnp.exp(logits_BHGKQ - _queries(max_BHGQ))
  if spec.round_shifts:
    exp_BHGKQ = exp_BHGKQ * _inverse_counts(q_slots, k_slots, spec)
  return exp_BHGKQ, max_BHGQ


def _chunks_per_step(n_chunks, batch_heads, spec):
  """The largest divisor of n_chunks whose step holds at most _BLOCK_VALUES logits."""
  per_chunk = batch_heads * spec.window * spec.chunk_len**2
  limit = max(1, _BLOCK_VALUES // per_chunk)
  return max(g for g in range(1, min(limit, n_chunks) + 1) if n_chunks % g == 0)


def _prepare(query_BHSD, value_BHSD, slots_BHS, spec):
  """Ring-pads the loop inputs and adds each query's window chunks for duplicate counting."""
  n_chunks = query_BHSD.shape[2] // spec.chunk_len
  query_BHPD = lsh_ring.pad_ring(query_BHSD, spec)
  query32_BHPD = query_BHPD.astype(jnp.float32)
  # A dot product: XLA:CPU reduces it much faster than a multiply and a sum.
  inv_norm_BHP = jax.lax.rsqrt(
    jnp.einsum("bhpd,bhpd->bhp", query32_BHPD, query32_BHPD) + NORM_EPSILON
  )
  slots_BHP = {name: lsh_ring.pad_ring(x, spec) for name, x in slots_BHS.items()}
  query_slots_BHP = dict(slots_BHP)
  if spec.round_shifts:
    # Computed per slot here: left to the loop, XLA would redo the modulo for every logit.
    n_hashes = sum(name.startswith("loc") for name in slots_BHS)
    for n in range(n_hashes):
      for t, offset in enumerate(range(-spec.n_chunks_before, spec.n_chunks_after + 1)):
        query_slots_BHP[f"target{n}_{t}"] = (slots_BHP[f"loc{n}"] + offset) % n_chunks
  key_slots_BHP = dict(slots_BHP, seg=jnp.where(slots_BHP["seg"] != 0, slots_BHP["seg"], -1))
  return _Inputs(
    query_BHPD, lsh_ring.pad_ring(value_BHSD, spec), inv_norm_BHP, query_slots_BHP, key_slots_BHP
  )


def _n_steps_and_block(query_BHSD, spec):
  batch, n_heads, n_slots, _ = query_BHSD.shape
  n_chunks = n_slots // spec.chunk_len
  n_block = _chunks_per_step(n_chunks, batch * n_heads, spec)
  return n_chunks // n_block, n_block


def _forward(query_BHSD, value_BHSD, slots_BHS, spec):
  inputs = _prepare(query_BHSD, value_BHSD, slots_BHS, spec)
  n_steps, n_block = _n_steps_and_block(query_BHSD, spec)

  def step(i, carry):
    out_BHSD, max_BHS, inv_sum_BHS = carry
    block = _Block(i, n_block, spec)
    exp_BHGKQ, max_BHGQ = _block_exp(block, inputs, spec)
    inv_sum_BHGQ = 1.0 / jnp.sum(exp_BHGKQ, axis=-2)
    value_BHGKD = block.windows(inputs.value_BHPD)
    out_BHGQD = (
      jnp.einsum(
        "bhgkq,bhgkd->bhgqd",
        exp_BHGKQ.astype(value_BHSD.dtype),
        value_BHGKD,
        preferred_element_type=jnp.float32,
      )
      * inv_sum_BHGQ[..., None]
    )
    return (
      block.put_queries(out_BHSD, out_BHGQD),
      block.put_queries(max_BHS, max_BHGQ),
      block.put_queries(inv_sum_BHS, inv_sum_BHGQ),
    )

  shape_BHS = query_BHSD.shape[:3]
  init = (
    jnp.zeros(query_BHSD.shape, jnp.float32),
    jnp.zeros(shape_BHS, jnp.float32),
    jnp.zeros(shape_BHS, jnp.float32),
  )
  out_BHSD, max_BHS, inv_sum_BHS = jax.lax.fori_loop(0, n_steps, step, init)
  return out_BHSD, max_BHS, inv_sum_BHS, inputs


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def attend_chunks(query_BHSD, value_BHSD, slots_BHS, spec):
  """Shared-QK softmax attention of every chunk of sorted slots to its window of chunks.

  Args:
    query_BHSD: queries in sorted order [B, H, S, D]; the keys are their length-normalised
      copies, and logits are scaled by 1/sqrt(D).
    value_BHSD: values, same order and shape.
    slots_BHS: dict of int32 arrays with one entry per slot along axis 2: ``pos`` (original
      position) and ``seg`` (segment id, 0 = padding); ``bucket`` when masking across buckets;
      with duplicate counting ``loc0`` .. ``loc{N-1}`` (the chunk the slot's position occupies
      in each of the N rounds) and, when also masking across buckets, ``round_bucket0`` ..
      (its bucket in each round). Each is [B, H, S], slots minor so a block's values are
      contiguous.
    spec: the static `ChunkSpec`.

  Returns:
    (out [B, H, S, D], lse [B, H, S]), float32. Padding queries see no key: their rows are finite,
    and their logits get zero gradient, as with autodiff through a mask.
  """
  out_BHSD, max_BHS, inv_sum_BHS, _ = _forward(query_BHSD, value_BHSD, slots_BHS, spec)
  return out_BHSD, max_BHS - jnp.log(inv_sum_BHS)


def _attend_chunks_fwd(query_BHSD, value_BHSD, slots_BHS, spec):
  out_BHSD, max_BHS, inv_sum_BHS, inputs = _forward(query_BHSD, value_BHSD, slots_BHS, spec)
  residuals = (inputs, slots_BHS["seg"], out_BHSD, max_BHS, inv_sum_BHS)
  return (out_BHSD, max_BHS - jnp.log(inv_sum_BHS)), residuals


def _attend_chunks_bwd(spec, residuals, cotangents):
  inputs, seg_BHS, out_BHSD, max_BHS, inv_sum_BHS = residuals
  grad_out_BHSD, grad_lse_BHS = cotangents
  dtype, value_dtype = inputs.query_BHPD.dtype, inputs.value_BHPD.dtype
  n_steps, n_block = _n_steps_and_block(out_BHSD, spec)
  # With p = exp * inv_sum: d logit = p * (v . g - <g, out> + g_lse). The 1/sum, the logit scale
  # and the zero rows of padding queries (which attend to nothing) are per-query factors.
  grad_scaled_BHSD = (grad_out_BHSD * inv_sum_BHS[..., None]).astype(value_dtype)
  inner_BHS = jnp.einsum("bhsd,bhsd->bhs", grad_out_BHSD, out_BHSD)
  offset_BHS = inv_sum_BHS * (grad_lse_BHS - inner_BHS)
  factor_BHS = jnp.where(seg_BHS != 0, 1.0 / math.sqrt(out_BHSD.shape[-1]), 0.0)

  def step(i, carry):
    grad_query_BHPD, grad_value_BHPD = carry
    block = _Block(i, n_block, spec)
    exp_BHGKQ, _ = _block_exp(block, inputs, spec, max_BHS=max_BHS)
    grad_scaled_BHGQD = block.queries(grad_scaled_BHSD)
    value_dot_grad_BHGKQ = jnp.einsum(
      "bhgkd,bhgqd->bhgkq",
      block.windows(inputs.value_BHPD),
      grad_scaled_BHGQD,
      preferred_element_type=jnp.float32,
    )
    grad_logits_BHGKQ = exp_BHGKQ * (
      (value_dot_grad_BHGKQ + _queries(block.queries(offset_BHS)))
      * _queries(block.queries(factor_BHS))
    )
    grad_logits_BHGKQ = grad_logits_BHGKQ.astype(dtype)
    key32_BHGKD = _window_keys(block, inputs)
    grad_query_BHGQD = jnp.einsum(
      "bhgkq,bhgkd->bhgqd",
      grad_logits_BHGKQ,
      key32_BHGKD.astype(dtype),
      preferred_element_type=jnp.float32,
    )
    grad_key_BHGKD = jnp.einsum(
      "bhgkq,bhgqd->bhgkd",
      grad_logits_BHGKQ,
      block.queries(inputs.query_BHPD, padded=True),
      preferred_element_type=jnp.float32,
    )
    # Through key = query * inv_norm: d query = inv_norm * (d key - key <key, d key>).
    radial_BHGK = jnp.einsum("bhgkd,bhgkd->bhgk", key32_BHGKD, grad_key_BHGKD)
    grad_key_BHGKD = block.windows(inputs.inv_norm_BHP)[..., None] * (
      grad_key_BHGKD - key32_BHGKD * radial_BHGK[..., None]
    )
    grad_value_BHGKD = jnp.einsum(
      "bhgkq,bhgqd->bhgkd",
      exp_BHGKQ.astype(value_dtype),
      grad_scaled_BHGQD,
      preferred_element_type=jnp.float32,
    )
    # Queries and keys are the same slots: both gradients go into one accumulator.
    return (
      block.add_windows(grad_query_BHPD, grad_key_BHGKD, own_BHGQ=grad_query_BHGQD),
      block.add_windows(grad_value_BHPD, grad_value_BHGKD),
    )

  init = (
    jnp.zeros(inputs.query_BHPD.shape, jnp.float32),
    jnp.zeros(inputs.value_BHPD.shape, jnp.float32),
  )
  grad_query_BHPD, grad_value_BHPD = jax.lax.fori_loop(0, n_steps, step, init)
  n_slots = out_BHSD.shape[2]
  return (
    lsh_ring.fold_ring(grad_query_BHPD, n_slots, spec).astype(dtype),
    lsh_ring.fold_ring(grad_value_BHPD, n_slots, spec).astype(value_dtype),
    None,
  )


attend_chunks.defvjp(_attend_chunks_fwd, _attend_chunks_bwd)
