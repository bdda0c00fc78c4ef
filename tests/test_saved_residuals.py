"""What a bf16 BERT training step keeps from its forward pass for the backward.

The arrays the backward keeps are the HBM traffic an accelerator step pays twice (written in
the forward, read in the backward), so the hand-written backward passes pin what they keep.
Each test fails on plain autodiff of the same maths.
"""

import contextlib
import io
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models.bert.model import BertForPreTraining
from bert_jax.models.config import ModelConfig

BATCH, LENGTH, HEADS, HEAD_DIM, INTERMEDIATE, LAYERS = 3, 40, 2, 16, 96, 2


def _saved_residuals(fn, *args):
  """(dtype, shape) of every array the backward pass of ``fn`` keeps from its forward pass."""
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    jax.ad_checkpoint.print_saved_residuals(fn, *args)
  found = re.findall(r"^(\w+)\[([\d,]*)\]", printed.getvalue(), flags=re.M)
  return [(dtype, tuple(int(d) for d in dims.split(",") if d)) for dtype, dims in found]


def _bf16_pretraining_residuals(scan_layers: bool):
  """The residuals of a 2-layer bf16 BERT pretraining loss with dropout on, padding included."""
  config = ModelConfig(
    hidden_size=HEADS * HEAD_DIM,
    num_heads=HEADS,
    num_layers=LAYERS,
    intermediate_size=INTERMEDIATE,
    vocab_size=64,
    max_position_embeddings=LENGTH,
    attention_kind="dense",
    dtype="bfloat16",
    scan_layers=scan_layers,
  )
  model = BertForPreTraining(config, deterministic=False)
  ids_BL = jnp.ones((BATCH, LENGTH), jnp.int32)
  mask_np = np.ones((BATCH, LENGTH), np.int32)
  mask_np[0, 25:] = 0
  mask_BL = jnp.asarray(mask_np)
  params = model.init(jax.random.key(0), ids_BL, ids_BL * 0, mask_BL, ids_BL[:, :3])

  def loss(params):
    outputs = model.apply(
      params, ids_BL, ids_BL * 0, mask_BL, ids_BL[:, :3], rngs={"dropout": jax.random.key(1)}
    )
    return jnp.sum(outputs["mlm_logits"]) + jnp.sum(outputs["nsp_logits"])

  return _saved_residuals(loss, params)


@pytest.fixture(scope="module")
def bf16_pretraining_residuals():
  return _bf16_pretraining_residuals(scan_layers=False)


def test_bf16_training_keeps_no_float32_attention_matrix_for_the_backward(
  bf16_pretraining_residuals,
):
  """Of each layer's [B, H, L, L]: the probabilities in bf16, nothing else.

  Autodiff of the reference kernel keeps float32 probabilities and the dropout mask (and
  more): the bytes a TPU or GPU step moved through HBM for attention came mostly from them.
  """
  square = [
    dtype for dtype, shape in bf16_pretraining_residuals if shape == (BATCH, HEADS, LENGTH, LENGTH)
  ]
  assert square == ["bf16"] * LAYERS, square


def test_bf16_training_keeps_one_intermediate_activation_per_layer(bf16_pretraining_residuals):
  """Of each layer's [B, L, intermediate]: only the bf16 pre-activation.

  Autodiff of GELU followed by the output dense keeps two (the pre-activation and the erf
  term, or the GELU output), and the forward product then reads both.
  """
  wide = [
    dtype for dtype, shape in bf16_pretraining_residuals if shape == (BATCH, LENGTH, INTERMEDIATE)
  ]
  assert wide == ["bf16"] * LAYERS, wide


def test_scanned_bf16_layers_keep_bf16_hidden_states_only():
  """Scanned, each layer's [B, L, H] residuals are bf16 activations, stacked over the layers.

  JAX, not XLA, picks a scanned body's residuals, and the stack holds them for every layer.
  Autodiff of Flax's layer norm keeps three float32 [B, L, H] arrays per norm
  (models/layer_norm.py), autodiff of dropout its boolean mask (models/dropout.py).
  """
  stacked = [
    dtype
    for dtype, shape in _bf16_pretraining_residuals(scan_layers=True)
    if shape == (LAYERS, BATCH, LENGTH, HEADS * HEAD_DIM)
  ]
  assert stacked and set(stacked) == {"bf16"}, stacked
