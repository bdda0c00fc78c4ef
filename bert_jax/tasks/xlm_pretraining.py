"""XLM's objectives on the one trainer (Lample & Conneau 2019): MLM, CLM and TLM.

All three predict tokens at slots of the batch (`data/parallel_pairs.py`): MLM and TLM at the
masked positions (TLM's input is a parallel pair with positions restarting at the second
sentence and per-token language ids), CLM the next token at every position of a causal model.
One loss: the mean cross-entropy over the real slots, normalised once on the global batch.
Metrics are named after the objective (``tlm_loss``, ``mlm_accuracy``, ``clm_loss``, ...).
"""

import dataclasses

import jax.numpy as jnp
import numpy as np

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.config import ModelConfig
from bert_jax.tasks.cross_entropy import softmax_cross_entropy
from bert_jax.tasks.interface import TaskDefaults

# data.objective -> the metrics' prefix.
_PREFIXES = {"none": "mlm", names.CLM: "clm", names.TLM: "tlm"}


@dataclasses.dataclass(frozen=True)
class XlmPretrainingTask(TaskDefaults):
  """Token prediction at ``num_predictions`` slots per sequence of ``max_seq_length``."""

  model_config: ModelConfig
  max_seq_length: int
  num_predictions: int
  objective: str = "none"

  @property
  def prefix(self) -> str:
    return _PREFIXES[self.objective]

  def example_batch(self, batch_size: int):
    """Zero-filled numpy batch with the pipeline's schema."""
    shape, slots = (batch_size, self.max_seq_length), (batch_size, self.num_predictions)
    return {
      "input_ids": np.zeros(shape, np.int32),
      "position_ids": np.zeros(shape, np.int32),
      "language_ids": np.zeros(shape, np.int32),
      "input_mask": np.ones(shape, np.int32),
      "masked_lm_positions": np.zeros(slots, np.int32),
      "masked_lm_ids": np.zeros(slots, np.int32),
      "masked_lm_weights": np.zeros(slots, np.float32),
    }

  def random_batch(self, batch_size: int, seed: int = 0):
    """Random pairs with padding and predicted slots (benchmarks and step-level tests)."""
    rng = np.random.default_rng(seed)
    length, slots = self.max_seq_length, self.num_predictions
    lengths = rng.integers(max(length // 2, 2), length + 1, size=batch_size)
    split_B1 = (lengths // 2)[:, None]
    position_L = np.arange(length)[None, :]
    mask = (position_L < lengths[:, None]).astype(np.int32)
    second = position_L >= split_B1
    n_langs = self.model_config.xlm.n_langs
    return {
      "input_ids": (
        rng.integers(5, self.model_config.vocab_size, (batch_size, length)) * mask
      ).astype(np.int32),
      "position_ids": (np.where(second, position_L - split_B1, position_L) * mask).astype(np.int32),
      "language_ids": (second * (n_langs > 1)).astype(np.int32) * mask,
      "input_mask": mask,
      "masked_lm_positions": np.stack(
        [np.sort(rng.choice(length, size=slots, replace=False)) for _ in range(batch_size)]
      ).astype(np.int32),
      "masked_lm_ids": rng.integers(5, self.model_config.vocab_size, (batch_size, slots)).astype(
        np.int32
      ),
      "masked_lm_weights": (rng.random((batch_size, slots)) < 0.9).astype(np.float32),
    }

  def model(self, deterministic: bool):
    return families.get(self.model_config.family).pretraining_model(
      self.model_config, deterministic
    )

  def model_inputs(self, batch):
    return (
      batch["input_ids"],
      None,  # No token types: XLM's segments are its languages.
      batch["input_mask"],
      batch["masked_lm_positions"],
      batch["position_ids"],
      batch["language_ids"],
    )

  def denominators(self, batch):
    return {"lm_weight": jnp.maximum(jnp.sum(batch["masked_lm_weights"]), 1.0)}

  def loss_and_sums(self, outputs, batch, denominators):
    logits_BPV = outputs["mlm_logits"].astype(jnp.float32)
    labels_BP = batch["masked_lm_ids"]
    weights_BP = batch["masked_lm_weights"].astype(jnp.float32)
    ce_BP = softmax_cross_entropy(logits_BPV, labels_BP)
    sums = {
      f"{self.prefix}_loss": jnp.sum(ce_BP * weights_BP),
      f"{self.prefix}_accuracy": jnp.sum((jnp.argmax(logits_BPV, -1) == labels_BP) * weights_BP),
      "lm_weight": jnp.sum(weights_BP),
    }
    return sums[f"{self.prefix}_loss"] / denominators["lm_weight"], sums

  def metrics_from_sums(self, sums):
    weight = max(float(sums["lm_weight"]), 1.0)
    loss = float(sums[f"{self.prefix}_loss"]) / weight
    return {
      "loss": loss,
      f"{self.prefix}_loss": loss,
      f"{self.prefix}_accuracy": float(sums[f"{self.prefix}_accuracy"]) / weight,
    }


def make_task(model_config: ModelConfig, data_config, data=None) -> XlmPretrainingTask:
  """The registry's entry point of `family_spec.CROSS_LINGUAL_LM` (XLM).

  Raises:
    UserInputError: an objective XLM has not, or ``model.causal`` not matching it (CLM needs
      a causal model; MLM and TLM read both directions).
  """
  del data
  objective = data_config.objective
  if objective not in _PREFIXES:
    raise UserInputError(
      f"data.objective={objective!r}: model.family='xlm' trains none (MLM), clm or tlm"
    )
  if model_config.causal != (objective == names.CLM):
    raise UserInputError(
      f"data.objective={objective!r} with model.causal={model_config.causal}: set "
      f"model.causal={objective == names.CLM} (only CLM hides later tokens)"
    )
  if objective == names.CLM and model_config.attention_dropout_rate > 0:
    raise UserInputError(
      f"data.objective='clm' runs XLM's attention through a causal kernel without attention "
      f"dropout, but model.attention_dropout_rate={model_config.attention_dropout_rate}; set "
      "model.attention_dropout_rate=0.0"
    )
  slots = (
    data_config.max_seq_length if objective == names.CLM else (data_config.max_predictions_per_seq)
  )
  return XlmPretrainingTask(model_config, data_config.max_seq_length, slots, objective)
