"""ELECTRA's objective: generator MLM + lambda * replaced-token detection, as sums and denominators.

The batch is the pretraining pipeline's (masked ids, masked positions, original ids, weights);
`bert_jax.models.electra.ElectraForPreTraining` samples the replacements and returns the
discriminator's labels with its logits. The replaced-token detection (RTD) loss is the sigmoid
cross-entropy averaged over every real (non-padding) token, as in the paper.
"""

import dataclasses

import jax.numpy as jnp
import optax

from bert_jax.models.config import ModelConfig
from bert_jax.tasks import pretraining, score_histograms
from bert_jax.tasks.cross_entropy import softmax_cross_entropy


@dataclasses.dataclass(frozen=True)
class ElectraPretrainingTask(pretraining.PretrainingTask):
  """Generator MLM at the masked positions + ``rtd_weight`` x discriminator RTD everywhere."""

  sentence_objective: str = "none"

  def model_inputs(self, batch):
    return (
      batch["input_ids"],
      batch["token_type_ids"],
      batch["input_mask"],
      batch["masked_lm_positions"],
      batch["masked_lm_ids"],
      batch["masked_lm_weights"],
    )

  def denominators(self, batch):
    """Real predictions (MLM) and real tokens (RTD) of the global batch."""
    return {
      "mlm_weight": jnp.maximum(jnp.sum(batch["masked_lm_weights"]), 1.0),
      "tokens": jnp.maximum(jnp.sum((batch["input_mask"] > 0).astype(jnp.float32)), 1.0),
    }

  def loss_and_sums(self, outputs, batch, denominators):
    """MLM + rtd_weight * RTD (normalised by the global denominators) and the metric sums."""
    weights_BP = batch["masked_lm_weights"].astype(jnp.float32)
    mlm_logits_BPV = outputs["mlm_logits"]
    mlm_ce_BP = softmax_cross_entropy(mlm_logits_BPV, batch["masked_lm_ids"])
    mlm_correct_BP = jnp.argmax(mlm_logits_BPV, -1) == batch["masked_lm_ids"]

    real_BL = (batch["input_mask"] > 0).astype(jnp.float32)
    labels_BL = outputs["rtd_labels"].astype(jnp.float32)
    rtd_logits_BL = outputs["rtd_logits"].astype(jnp.float32)
    rtd_ce_BL = optax.sigmoid_binary_cross_entropy(rtd_logits_BL, labels_BL)
    predicted_BL = (rtd_logits_BL > 0).astype(jnp.float32)
    replaced_counts, original_counts = score_histograms.probability_histograms(
      rtd_logits_BL, labels_BL, real_BL
    )
    sums = {
      "mlm_loss": jnp.sum(mlm_ce_BP * weights_BP),
      "mlm_accuracy": jnp.sum(mlm_correct_BP * weights_BP),
      "mlm_weight": jnp.sum(weights_BP),
      "rtd_loss": jnp.sum(rtd_ce_BL * real_BL),
      "rtd_correct": jnp.sum((predicted_BL == labels_BL) * real_BL),
      "rtd_tokens": jnp.sum(real_BL),
      "rtd_true_positives": jnp.sum(predicted_BL * labels_BL * real_BL),
      "rtd_predicted_replaced": jnp.sum(predicted_BL * real_BL),
      "rtd_replaced": jnp.sum(labels_BL * real_BL),
      # Probability histograms of replaced / original tokens: the AUC (threshold-free).
      "rtd_replaced_histogram": replaced_counts,
      "rtd_original_histogram": original_counts,
    }
    loss = (
      sums["mlm_loss"] / denominators["mlm_weight"]
      + self.model_config.electra.rtd_weight * sums["rtd_loss"] / denominators["tokens"]
    )
    return loss, sums

  def metrics_from_sums(self, sums):
    """Host-side means: generator MLM loss / accuracy; discriminator loss, accuracy over real
    tokens, precision and recall of "replaced", the all-"original" baseline accuracy, and the
    ROC AUC of the replaced-vs-original scores (0.5 = no better than a constant guess)."""
    value = lambda key: float(sums[key])  # pylint: disable=unnecessary-lambda-assignment
    mlm_weight, tokens = max(value("mlm_weight"), 1.0), max(value("rtd_tokens"), 1.0)
    metrics = {
      "mlm_loss": value("mlm_loss") / mlm_weight,
      "mlm_accuracy": value("mlm_accuracy") / mlm_weight,
      "rtd_loss": value("rtd_loss") / tokens,
      "rtd_accuracy": value("rtd_correct") / tokens,
      "rtd_precision": value("rtd_true_positives") / max(value("rtd_predicted_replaced"), 1.0),
      "rtd_recall": value("rtd_true_positives") / max(value("rtd_replaced"), 1.0),
      "rtd_baseline_accuracy": 1.0 - value("rtd_replaced") / tokens,
      "rtd_auc": score_histograms.auc_from_histograms(
        sums["rtd_replaced_histogram"], sums["rtd_original_histogram"]
      ),
    }
    metrics["loss"] = (
      metrics["mlm_loss"] + self.model_config.electra.rtd_weight * metrics["rtd_loss"]
    )
    return metrics


def make_task(model_config: ModelConfig, data_config, data=None) -> pretraining.PretrainingTask:
  """The registry's entry point of `family_spec.REPLACED_TOKEN_DETECTION` (ELECTRA; a
  ``model.electra.lone_generator`` model trains BERT's masked LM alone).

  Raises:
    UserInputError: a sentence-level objective is configured (ELECTRA has no sentence head).
  """
  del data
  pretraining.check_sentence_head(model_config, data_config)
  if model_config.electra.lone_generator:
    return pretraining.PretrainingTask(
      model_config,
      data_config.max_seq_length,
      data_config.max_predictions_per_seq,
      sentence_objective="none",
    )
  return ElectraPretrainingTask(
    model_config, data_config.max_seq_length, data_config.max_predictions_per_seq
  )
