"""tools/embed for the families with segment-level memory (xlnet, transformer_xl).

Hidden state 0 is the word embedding, i the output of layer i (each layer's input is what the
memory caches, `recurrence.next_memory`). transformer_xl is a causal LM over token streams, so its
examples are the line's tokens alone (no [CLS] / [SEP], no sentence pairs).

With ``memory_across_lines`` the lines of a document are embedded in order, each attending to
the memory of the lines before it (``mem_len`` positions, the run's
``model.recurrence.mem_len`` unless given): a blank line ends a document and resets the
memory, and is not an example. Documents run side by side, one per batch row; a row's memory
holds only real tokens (padding is never cached), right-aligned so the newest memory is next
to the line, as in training.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.config import ModelConfig


@functools.partial(jax.jit, static_argnames=("model", "layers"))
def _forward(
  params,
  input_ids_BL,
  token_type_ids_BL,
  input_mask_BL,
  memory,
  memory_ids_BN,
  *,
  model: ModelConfig,
  layers: tuple,
):
  """(hidden [B, K, L, D] float32, zero past the end; each layer's input [B, L, D])."""
  out = (
    families.get(model.family)
    .encoder(model)
    .apply(
      {"params": params},
      input_ids_BL,
      token_type_ids_BL,
      input_mask_BL,
      memory=memory,
      memory_ids_BN=memory_ids_BN,
      method="streams",
    )
  )
  hidden = [*out["layer_inputs"], out["content"]]
  real_BL = (input_mask_BL > 0).astype(jnp.float32)
  hidden_BKLD = jnp.stack([hidden[k].astype(jnp.float32) for k in layers], axis=1)
  return hidden_BKLD * real_BL[:, None, :, None], out["layer_inputs"]


def _append(memory_NMD, memory_ids_NM, inputs_NLD, lengths_N):
  """Each row's memory followed by its real tokens, the last M positions kept (numpy)."""
  mem_len = memory_ids_NM.shape[1]
  new_memory, new_ids = np.zeros_like(memory_NMD), np.zeros_like(memory_ids_NM)
  for row, length in enumerate(lengths_N):
    joined = np.concatenate([memory_NMD[row], inputs_NLD[row, :length]])[-mem_len:]
    joined_ids = np.concatenate([memory_ids_NM[row], np.ones(length, np.int32)])[-mem_len:]
    new_memory[row, mem_len - len(joined) :], new_ids[row, mem_len - len(joined_ids) :] = (
      joined,
      joined_ids,
    )
  return new_memory, new_ids


def hidden_states(
  params,
  model: ModelConfig,
  features,
  layers: tuple,
  batch_size: int,
  documents=None,
  mem_len: int = 0,
):
  """Hidden states [N, K, L, D] float32 of `embed_examples.Features`, zero past each example's end.

  Args:
    params: the ``bert`` params (the family's trunk).
    model: the run's model config (family xlnet or transformer_xl).
    features: the examples.
    layers: hidden-state indices (0 = word embeddings .. num_layers).
    batch_size: rows per model call (documents side by side with memory, else examples).
    documents: [N] document index of each example to carry memory across its lines, or None.
    mem_len: memory positions with ``documents`` (0 = ``model.recurrence.mem_len``).

  Raises:
    UserInputError: memory across lines without a memory length.
  """
  model = dataclasses.replace(model, remat_policy="none", attention_kind="dense")
  count, length = features.input_ids.shape
  mask_NL = (np.arange(length)[None, :] < features.lengths[:, None]).astype(np.int32)
  run = functools.partial(_forward, jax.device_put(params), model=model, layers=layers)
  if documents is None:
    padded = -(-count // batch_size) * batch_size
    pad = lambda x: np.pad(x, ((0, padded - count), (0, 0)))
    ids, types, mask = pad(features.input_ids), pad(features.token_type_ids), pad(mask_NL)
    rows = [slice(s, s + batch_size) for s in range(0, padded, batch_size)]
    batches = [np.asarray(run(ids[r], types[r], mask[r], None, None)[0]) for r in rows]
    return np.concatenate(batches)[:count]
  if mem_len < 0:
    raise UserInputError(
      f"--mem_len={mem_len} must be >= 0 (0 = the run's model.recurrence.mem_len)"
    )
  mem_len = mem_len or model.recurrence.mem_len
  if mem_len < 1:
    raise UserInputError(
      "--memory_across_lines needs a memory, but the run has model.recurrence.mem_len="
      f"{model.recurrence.mem_len}; "
      "pass --mem_len=N (N > 0)"
    )
  hidden = np.zeros((count, len(layers), length, model.hidden_size), np.float32)
  starts = np.flatnonzero(np.diff(documents, prepend=-1))
  ends = np.append(starts[1:], count)
  for first in range(0, len(starts), batch_size):
    rows = list(zip(starts[first : first + batch_size], ends[first : first + batch_size]))
    memory = [np.zeros((batch_size, mem_len, model.hidden_size), np.float32)] * model.num_layers
    memory_ids = np.zeros((batch_size, mem_len), np.int32)
    for step in range(max(end - start for start, end in rows)):
      # Row r embeds line `step` of its document; rows whose document has ended are padding.
      index = np.array([start + step if start + step < end else -1 for start, end in rows])
      index = np.pad(index, (0, batch_size - len(rows)), constant_values=-1)
      ids, types, mask = (
        np.where(index[:, None] >= 0, x_NL[index], 0)
        for x_NL in (features.input_ids, features.token_type_ids, mask_NL)
      )
      out, inputs = run(ids, types, mask, memory, memory_ids)
      lengths = np.where(index >= 0, features.lengths[index], 0)
      updated = [_append(m, memory_ids, np.asarray(x), lengths) for m, x in zip(memory, inputs)]
      memory, memory_ids = [m for m, _ in updated], updated[0][1]
      hidden[index[index >= 0]] = np.asarray(out)[index >= 0]
  return hidden


def check_options(model: ModelConfig, pooling: str, with_attention: bool):
  """Refuses what the relative-attention families cannot give, in one line each."""
  if with_attention:
    raise UserInputError(
      f"--attention is not available for model.family={model.family!r} (its relative "
      "attention forms no saved attention matrix); drop --attention"
    )
  if pooling == "cls" and families.get(model.family).plain_examples:
    raise UserInputError(
      f"--pooling=cls needs a [CLS] token, which {model.family} examples have not; use "
      "--pooling=mean or none"
    )
