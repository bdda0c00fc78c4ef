"""The Transformer-XL causal LM (``data.objective='clm'``): next-token loss with segment memory.

Every batch row is a stream of consecutive segments (`data/segment_batches.py`); the model
attends to the previous segments' hidden states (the memory, ``model.recurrence.mem_len`` per
layer) as well as to the current segment, causally. The memory is part of the train state
(`train/state.py`): each step reads the previous step's and leaves its own, with the gradient
stopped; document ids reset it, since a token only attends to memory of its own document.

Loss and metrics are sums over the real next-token predictions (labels that cross into another
document have weight 0) with their count, normalised once on the global batch.
"""

import dataclasses
import math

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.config import ModelConfig
from bert_jax.models.recurrence_options import with_recurrence
from bert_jax.tasks.cross_entropy import softmax_cross_entropy
from bert_jax.tasks.interface import TaskDefaults

# Logical axes of the memory: it is an activation (batch over data/fsdp, the rest replicated).
_HIDDEN_AXES = (names.ACTIVATION_BATCH, names.ACTIVATION_LENGTH, names.ACTIVATION_EMBED)
_IDS_AXES = (names.ACTIVATION_BATCH, names.ACTIVATION_LENGTH)


@dataclasses.dataclass(frozen=True)
class CausalLmTask(TaskDefaults):
  """Next-token prediction over ``segment_len``-token segments with per-layer memory."""

  model_config: ModelConfig
  segment_len: int

  @property
  def mem_len(self) -> int:
    """Memory positions per layer in training (0 = no recurrence)."""
    return self.model_config.recurrence.mem_len

  @property
  def eval_mem_len(self) -> int:
    """Memory positions per layer at evaluation (``model.recurrence.eval_mem_len``; -1 =
    ``mem_len``)."""
    eval_mem_len = self.model_config.recurrence.eval_mem_len
    return self.mem_len if eval_mem_len < 0 else eval_mem_len

  def example_batch(self, batch_size: int):
    """Zero-filled numpy batch with the pipeline's schema (one document per row)."""
    shape = (batch_size, self.segment_len)
    return {
      "input_ids": np.zeros(shape, np.int32),
      "document_ids": np.ones(shape, np.int32),
      "labels": np.zeros(shape, np.int32),
      "label_weights": np.ones(shape, np.float32),
    }

  def random_batch(self, batch_size: int, seed: int = 0):
    """Random tokens, each row with a document boundary somewhere (benchmarks and tests)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, self.model_config.vocab_size, size=(batch_size, self.segment_len + 1))
    starts_B1 = rng.integers(1, self.segment_len + 1, size=(batch_size, 1))
    documents = 1 + (np.arange(self.segment_len + 1)[None, :] >= starts_B1)
    return {
      "input_ids": ids[:, :-1].astype(np.int32),
      "document_ids": documents[:, :-1].astype(np.int32),
      "labels": ids[:, 1:].astype(np.int32),
      "label_weights": (documents[:, 1:] == documents[:, :-1]).astype(np.float32),
    }

  def model(self, deterministic: bool, mem_len: int | None = None):
    """The family's LM with memory; ``mem_len`` (default: training's) sizes the memory it
    leaves for the next segment."""
    config = self.model_config
    if mem_len is not None:
      config = with_recurrence(config, mem_len=mem_len)
    return families.get(config.family).causal_lm_model(config, deterministic=deterministic)

  def model_inputs(self, batch):
    ids_BL = batch["input_ids"]
    # One segment type (XLNet's relative segment encoding sees no pairs); document ids mask.
    return ids_BL, jnp.zeros_like(ids_BL), batch["document_ids"]

  def init_memory(self, batch_size: int, mem_len: int):
    """The memory before the first segment, boxed with its logical axes: zeros of document 0,
    which no token attends to (document ids start at 1)."""
    config = self.model_config
    shape = (batch_size, mem_len, config.hidden_size)
    hidden = tuple(
      nn.LogicallyPartitioned(jnp.zeros(shape, jnp.dtype(config.dtype)), _HIDDEN_AXES)
      for _ in range(config.num_layers)
    )
    ids = nn.LogicallyPartitioned(jnp.zeros(shape[:2], jnp.int32), _IDS_AXES)
    return {"hidden": hidden, "ids": ids}

  def memory_inputs(self, memory):
    """Keyword arguments of the model for ``memory`` (the state's, or eval's)."""
    return {"memory": list(memory["hidden"]), "memory_ids_BN": memory["ids"]}

  def next_memory(self, outputs, memory):
    """The memory the step leaves, in the dtypes of the one it read."""
    return {
      "hidden": tuple(
        new.astype(old.dtype) for new, old in zip(outputs["memory"], memory["hidden"], strict=True)
      ),
      "ids": outputs["memory_ids"].astype(memory["ids"].dtype),
    }

  def checkpoint_record(self, batch_size: int) -> dict:
    """A resume must keep the streams (rows) and their segment length: the memory and the
    data position follow them."""
    return {"clm_rows": batch_size, "clm_segment_len": self.segment_len}

  def denominators(self, batch):
    """Real next-token predictions in the global batch."""
    return {"lm_weight": jnp.maximum(jnp.sum(batch["label_weights"]), 1.0)}

  def loss_and_sums(self, outputs, batch, denominators):
    """Mean next-token cross-entropy (float32) over real predictions, and metric sums; a model
    that returns ``log_probs`` (Transformer-XL's adaptive softmax) is scored on them."""
    logits_BLV = outputs["logits"].astype(jnp.float32)
    labels_BL = batch["labels"]
    weights_BL = batch["label_weights"].astype(jnp.float32)
    if "log_probs" in outputs:  # An adaptive softmax: the target's log-probability.
      target_BL = jnp.take_along_axis(outputs["log_probs"], labels_BL[..., None], axis=-1)
      ce_BL = -target_BL[..., 0].astype(jnp.float32)
    else:
      ce_BL = softmax_cross_entropy(logits_BLV, labels_BL)
    sums = {
      "lm_loss": jnp.sum(ce_BL * weights_BL),
      "lm_accuracy": jnp.sum((jnp.argmax(logits_BLV, -1) == labels_BL) * weights_BL),
      "lm_weight": jnp.sum(weights_BL),
    }
    return sums["lm_loss"] / denominators["lm_weight"], sums

  def metrics_from_sums(self, sums):
    """Host-side: loss (nats per token), accuracy, perplexity and bits per token."""
    weight = max(float(sums["lm_weight"]), 1.0)
    loss = float(sums["lm_loss"]) / weight
    return {
      "loss": loss,
      "accuracy": float(sums["lm_accuracy"]) / weight,
      "perplexity": math.exp(min(loss, 700.0)),  # exp overflows a float past ~709.
      "bits_per_token": loss / math.log(2),
    }


def make_task(model_config: ModelConfig, data_config, data=None) -> CausalLmTask:
  """The registry's entry point for ``data.objective='clm'``.

  Raises:
    UserInputError: the family has no memory, or the model is not causal.
  """
  del data
  family = families.get(model_config.family)
  if family.causal_lm_model is None:
    with_memory = [n for n in families.registered() if families.get(n).causal_lm_model]
    raise UserInputError(
      f"data.objective='clm' needs a family with Transformer-XL memory ({', '.join(with_memory)})"
      f"; model.family={family.name!r} has none: set model.family or data.objective"
    )
  if not model_config.causal:
    raise UserInputError(
      f"data.objective='clm' predicts the next token, so model.family={family.name!r} must not "
      "see later tokens; set model.causal=True"
    )
  return CausalLmTask(model_config, data_config.max_seq_length)
