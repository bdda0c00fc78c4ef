"""Ranges of the numeric config keys, checked in one place before a run writes anything.

A value outside its range is refused with one line naming the key, the value, the range and a
sensible value; a negative learning rate, for instance, would train by gradient ascent and let
checkpoint rotation delete good checkpoints. `settings_from_config` calls `check_ranges` on the
converted settings, so every entry point that reads a config gets the same checks.
"""

import dataclasses
import math
from collections.abc import Callable

from absl import logging

from bert_jax.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class Range:
  """A numeric key's valid values: ``test(value)`` holds; ``text`` says so in words."""

  text: str
  test: Callable[[float], bool]


def _finite(value) -> bool:
  return isinstance(value, (int, float)) and math.isfinite(value)


POSITIVE = Range("> 0", lambda v: _finite(v) and v > 0)
AT_LEAST_ONE = Range(">= 1", lambda v: _finite(v) and v >= 1)
NON_NEGATIVE = Range(">= 0", lambda v: _finite(v) and v >= 0)
PROBABILITY = Range("in [0, 1]", lambda v: _finite(v) and 0 <= v <= 1)
OPEN_PROBABILITY = Range("in (0, 1]", lambda v: _finite(v) and 0 < v <= 1)
RATE = Range("in [0, 1)", lambda v: _finite(v) and 0 <= v < 1)
MESH_SIZE = Range("-1 (all remaining devices) or >= 1", lambda v: v == -1 or _finite(v) and v >= 1)

# (section, key, range, a typical value). Sections are the settings' attributes ("" = top level).
RULES = (
  ("trainer", "max_checkpoints_to_keep", AT_LEAST_ONE, "3"),
  ("trainer", "peak_flops_per_device", NON_NEGATIVE, "0 (from the device kind)"),
  ("trainer", "profile_start_step", NON_NEGATIVE, "10"),
  ("trainer", "profile_num_steps", NON_NEGATIVE, "0 (off)"),
  ("trainer", "lock_lease_secs", POSITIVE, "300"),
  ("optimizer", "learning_rate", POSITIVE, "1e-4 (BERT pretraining) or 2e-5 (fine-tuning)"),
  ("optimizer", "warmup_steps", NON_NEGATIVE, "10000 (BERT) or 0"),
  ("optimizer", "weight_decay", NON_NEGATIVE, "0.01"),
  ("optimizer", "b1", RATE, "0.9"),
  ("optimizer", "b2", RATE, "0.999"),
  ("optimizer", "eps", POSITIVE, "1e-6"),
  ("optimizer", "max_grad_norm", NON_NEGATIVE, "1.0 (0 = no clipping)"),
  ("model", "vocab_size", AT_LEAST_ONE, "30522"),
  ("model", "hidden_size", AT_LEAST_ONE, "768"),
  ("model", "num_layers", AT_LEAST_ONE, "12"),
  ("model", "num_heads", AT_LEAST_ONE, "12"),
  ("model", "intermediate_size", AT_LEAST_ONE, "3072"),
  ("model", "max_position_embeddings", AT_LEAST_ONE, "512"),
  ("model", "type_vocab_size", AT_LEAST_ONE, "2"),
  ("model", "hidden_dropout_rate", RATE, "0.1"),
  ("model", "attention_dropout_rate", RATE, "0.1"),
  ("model", "layer_norm_eps", POSITIVE, "1e-12"),
  ("model", "initializer_range", POSITIVE, "0.02"),
  ("model", "ffn_chunk_len", NON_NEGATIVE, "0 (unchunked)"),
  ("model.lsh", "chunk_len", AT_LEAST_ONE, "64"),
  ("model.lsh", "n_hashes", AT_LEAST_ONE, "4"),
  ("model.lsh", "n_chunks_before", NON_NEGATIVE, "1"),
  ("model.lsh", "n_chunks_after", NON_NEGATIVE, "0"),
  ("data", "max_seq_length", AT_LEAST_ONE, "128"),
  ("data", "max_predictions_per_seq", NON_NEGATIVE, "20"),
  ("data", "mask_prob", OPEN_PROBABILITY, "0.15"),
  ("data", "short_seq_prob", PROBABILITY, "0.1"),
  ("data", "eval_fraction", RATE, "0.05"),
  ("data", "span_geometric_p", OPEN_PROBABILITY, "0.2"),
  ("data", "max_span_length", AT_LEAST_ONE, "10"),
  ("data", "shuffle_buffer_size", AT_LEAST_ONE, "10000"),
  ("data", "tfds_max_documents", NON_NEGATIVE, "0 (all)"),
  ("data", "max_train_examples", NON_NEGATIVE, "0 (all)"),
  ("data", "max_eval_examples", NON_NEGATIVE, "0 (all)"),
  ("data", "doc_stride", AT_LEAST_ONE, "128"),
  ("data", "max_query_length", AT_LEAST_ONE, "64"),
  ("data", "n_best_size", AT_LEAST_ONE, "20"),
  ("data", "max_answer_length", AT_LEAST_ONE, "30"),
  ("data", "num_choices", AT_LEAST_ONE, "4"),
  ("mesh", "data", MESH_SIZE, "-1"),
  ("mesh", "fsdp", MESH_SIZE, "1"),
  ("mesh", "tensor", MESH_SIZE, "1"),
  ("mesh", "dcn_data", MESH_SIZE, "-1"),
  ("mesh", "dcn_fsdp", MESH_SIZE, "1"),
  ("mesh", "dcn_tensor", MESH_SIZE, "1"),
)


def _node(settings, section: str):
  node = settings
  for name in section.split("."):
    node = getattr(node, name, None)
  return node


def check_ranges(settings):
  """Raises `UserInputError` for the first numeric key outside its range.

  Args:
    settings: the `RunSettings` (trainer, model, data, optimizer, mesh); keys a section does
      not have (fine-tuning data has no ``mask_prob``) are skipped.
  """
  for section, key, valid, typical in RULES:
    node = _node(settings, section)
    if node is None or not hasattr(node, key) or isinstance(getattr(node, key), bool):
      continue
    value = getattr(node, key)
    if value is None:  # An unset optional key (e.g. data.num_eval_examples).
      continue
    if not valid.test(value):
      name = key if section == "trainer" else f"{section}.{key}"
      raise UserInputError(f"{name}={value!r} must be {valid.text}; e.g. {typical}")
  eval_examples = getattr(settings.data, "num_eval_examples", None)
  if eval_examples is not None and eval_examples < 1:
    raise UserInputError(
      f"data.num_eval_examples={eval_examples} must be >= 1, or unset for every held-out pair"
    )
  warmup, steps = settings.optimizer.warmup_steps, settings.trainer.num_train_steps
  if (
    warmup > steps
    and not settings.trainer.warmup_fraction
    and not settings.trainer.num_train_epochs
  ):
    # Allowed (a short debugging run of a long recipe), but the peak is never reached.
    logging.warning(
      "optimizer.warmup_steps=%d exceeds num_train_steps=%d: the learning rate never reaches "
      "its peak %g",
      warmup,
      steps,
      settings.optimizer.learning_rate,
    )
