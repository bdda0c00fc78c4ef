"""The pretraining objective: masked LM (+ next-sentence prediction) as sums and denominators.

Losses are returned as sums over examples / predictions together with their denominators, so
gradient accumulation and multi-host reduction divide once, on the whole global batch.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.config import ModelConfig
from bert_jax.tasks.cross_entropy import softmax_cross_entropy
from bert_jax.tasks.interface import TaskDefaults


@dataclasses.dataclass(frozen=True)
class PretrainingTask(TaskDefaults):
  """BERT pretraining: MLM at the masked positions, plus the sentence-pair objective (NSP, or
  ALBERT's SOP) unless ``sentence_objective`` is "none", plus SpanBERT's boundary objective when
  the model config has ``span_boundary.enabled``."""

  model_config: ModelConfig
  max_seq_length: int
  max_predictions_per_seq: int
  # "nsp", "sop" or "none": one 2-way head serves both; its metrics are named after it.
  sentence_objective: str = "nsp"

  @property
  def use_nsp(self) -> bool:
    return self.sentence_objective != "none"

  def example_batch(self, batch_size: int):
    """Zero-filled numpy batch with the pipeline's schema (shapes and dtypes)."""
    length, predictions = self.max_seq_length, self.max_predictions_per_seq
    ints = lambda *shape: np.zeros(shape, np.int32)  # pylint: disable=unnecessary-lambda-assignment
    return {
      "input_ids": ints(batch_size, length),
      "token_type_ids": ints(batch_size, length),
      "input_mask": np.ones((batch_size, length), np.int32),
      "masked_lm_positions": ints(batch_size, predictions),
      "masked_lm_ids": ints(batch_size, predictions),
      "masked_lm_weights": np.zeros((batch_size, predictions), np.float32),
      "next_sentence_labels": ints(batch_size),
    }

  def random_batch(self, batch_size: int, seed: int = 0):
    """A random batch with padding and masked positions (benchmarks and step-level tests)."""
    rng = np.random.default_rng(seed)
    length, predictions = self.max_seq_length, self.max_predictions_per_seq
    vocab = self.model_config.vocab_size
    lengths = rng.integers(max(length // 2, predictions), length + 1, size=batch_size)
    input_mask = (np.arange(length)[None, :] < lengths[:, None]).astype(np.int32)
    positions = np.stack([np.sort(rng.choice(n, size=predictions, replace=False)) for n in lengths])
    return {
      "input_ids": (rng.integers(5, vocab, size=(batch_size, length)) * input_mask).astype(
        np.int32
      ),
      "token_type_ids": ((np.arange(length)[None, :] >= lengths[:, None] // 2) * input_mask).astype(
        np.int32
      ),
      "input_mask": input_mask,
      "masked_lm_positions": positions.astype(np.int32),
      "masked_lm_ids": rng.integers(5, vocab, size=(batch_size, predictions)).astype(np.int32),
      "masked_lm_weights": (rng.random((batch_size, predictions)) < 0.9).astype(np.float32),
      "next_sentence_labels": rng.integers(0, 2, size=batch_size).astype(np.int32),
    }

  def model(self, deterministic: bool):
    """The pretraining model of ``model.family`` (MLM head + sentence head)."""
    family = families.get(self.model_config.family)
    return family.pretraining_model(self.model_config, deterministic=deterministic)

  def model_inputs(self, batch):
    return (
      batch["input_ids"],
      batch["token_type_ids"],
      batch["input_mask"],
      batch["masked_lm_positions"],
    )

  def denominators(self, batch):
    """Normalisers of the global batch: number of real predictions and of examples."""
    return {
      "mlm_weight": jnp.maximum(jnp.sum(batch["masked_lm_weights"]), 1.0),
      "examples": jnp.float32(batch["input_ids"].shape[0]),
    }

  def loss_and_sums(self, outputs, batch, denominators):
    """Loss to differentiate (already normalised by the global denominators) and metric sums."""
    weights_BP = batch["masked_lm_weights"].astype(jnp.float32)
    mlm_logits_BPV = outputs["mlm_logits"]
    mlm_ce_BP = softmax_cross_entropy(mlm_logits_BPV, batch["masked_lm_ids"])
    mlm_correct_BP = jnp.argmax(mlm_logits_BPV, -1) == batch["masked_lm_ids"]
    sums = {
      "mlm_loss": jnp.sum(mlm_ce_BP * weights_BP),
      "mlm_accuracy": jnp.sum(mlm_correct_BP * weights_BP),
      "mlm_weight": jnp.sum(weights_BP),
    }
    loss = sums["mlm_loss"] / denominators["mlm_weight"]
    if self.model_config.span_boundary.enabled:
      # SpanBERT's boundary objective predicts the same tokens again, from the span's ends.
      sbo_logits_BPV = outputs["sbo_logits"]
      sums["sbo_loss"] = jnp.sum(
        softmax_cross_entropy(sbo_logits_BPV, batch["masked_lm_ids"]) * weights_BP
      )
      sums["sbo_accuracy"] = jnp.sum(
        (jnp.argmax(sbo_logits_BPV, -1) == batch["masked_lm_ids"]) * weights_BP
      )
      loss = loss + sums["sbo_loss"] / denominators["mlm_weight"]
    if self.use_nsp:
      nsp_logits_B2 = outputs["nsp_logits"]
      labels_B = batch["next_sentence_labels"]
      objective = self.sentence_objective
      sums[f"{objective}_loss"] = jnp.sum(softmax_cross_entropy(nsp_logits_B2, labels_B))
      sums[f"{objective}_accuracy"] = jnp.sum(jnp.argmax(nsp_logits_B2, -1) == labels_B)
      loss = loss + sums[f"{objective}_loss"] / denominators["examples"]
    sums["examples"] = jnp.float32(batch["input_ids"].shape[0])
    return loss, sums

  def metrics_from_sums(self, sums):
    """Host-side: per-prediction / per-example means from accumulated sums."""
    mlm_weight = max(float(sums["mlm_weight"]), 1.0)
    metrics = {
      "mlm_loss": float(sums["mlm_loss"]) / mlm_weight,
      "mlm_accuracy": float(sums["mlm_accuracy"]) / mlm_weight,
    }
    loss = metrics["mlm_loss"]
    if self.model_config.span_boundary.enabled:
      metrics["sbo_loss"] = float(sums["sbo_loss"]) / mlm_weight
      metrics["sbo_accuracy"] = float(sums["sbo_accuracy"]) / mlm_weight
      loss += metrics["sbo_loss"]
    if self.use_nsp:
      examples = max(float(sums["examples"]), 1.0)
      for key in (f"{self.sentence_objective}_loss", f"{self.sentence_objective}_accuracy"):
        metrics[key] = float(sums[key]) / examples
      loss += metrics[f"{self.sentence_objective}_loss"]
    metrics["loss"] = loss
    return metrics


@dataclasses.dataclass(frozen=True)
class PermutationLmTask(PretrainingTask):
  """XLNet's permutation LM over the pipeline's masked positions (`models/xlnet/permutation.py`).

  The model sees the original tokens (the masked ids put back): the factorisation order, not
  a [MASK] token, hides each target from its own prediction. Loss and metrics are the MLM
  ones at those positions.
  """

  sentence_objective: str = "none"

  def model_inputs(self, batch):
    positions_BP, weights_BP = batch["masked_lm_positions"], batch["masked_lm_weights"]
    ids_BL = jnp.asarray(batch["input_ids"])
    rows_B1 = jnp.arange(ids_BL.shape[0])[:, None]
    restored_BP = jnp.where(weights_BP > 0, batch["masked_lm_ids"], ids_BL[rows_B1, positions_BP])
    original_BL = ids_BL.at[rows_B1, positions_BP].set(restored_BP)
    return (
      original_BL,
      batch["token_type_ids"],
      batch["input_mask"],
      positions_BP,
      weights_BP,
    )


def check_sentence_head(model_config: ModelConfig, data_config):
  """Refuses a sentence-level ``data.objective`` for a family without the sentence head."""
  if data_config.objective != "none" and not families.get(model_config.family).sentence_head:
    raise UserInputError(
      f"data.objective={data_config.objective!r} needs a sentence head, which "
      f"model.family={model_config.family!r} has not; set data.objective='none' (masked LM only)"
    )


def make_permutation_lm_task(model_config: ModelConfig, data_config, data=None):
  """The registry's entry point of `family_spec.PERMUTATION_LM` (XLNet)."""
  del data
  check_sentence_head(model_config, data_config)
  return PermutationLmTask(
    model_config, data_config.max_seq_length, data_config.max_predictions_per_seq
  )


def make_task(model_config: ModelConfig, data_config, data=None) -> PretrainingTask:
  """The registry's entry point of `family_spec.MASKED_LM`: sized by the
  `PretrainingDataConfig`, not by the data."""
  del data
  check_sentence_head(model_config, data_config)
  # NSP and SOP share the 2-way sentence head; objective "none" trains MLM alone.
  return PretrainingTask(
    model_config,
    data_config.max_seq_length,
    data_config.max_predictions_per_seq,
    sentence_objective=data_config.objective,
  )


def sum_trees(a, b):
  return jax.tree.map(jnp.add, a, b)
