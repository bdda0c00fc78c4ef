"""Matmul FLOPs of one train step of a family's pretraining model (`Family.train_flops`).

2 FLOPs per multiply-add, backward = 2x forward (3x forward in all), as MFU conventionally
counts. train/flops.py turns them into tokens/s and MFU.
"""

from bert_jax.models.config import ModelConfig


def encoder_flops(config: ModelConfig, tokens: int, seq_len: int) -> float:
  """Forward FLOPs of the embedding projection (if any) and the layers over ``tokens``.

  Per token and layer: the weights (4 D x D attention projections, 2 D x F feed-forward) and
  the two attention matmuls (QK^T and PV, each 2*L*D).
  """
  d, f = config.hidden_size, config.intermediate_size
  embedding = config.embedding_size or d
  projection = 0 if embedding == d else tokens * 2 * embedding * d
  per_token_layer = 2 * (4 * d * d + 2 * d * f) + 2 * 2 * seq_len * d
  return projection + tokens * config.num_layers * per_token_layer


def masked_lm_train_flops(
  config: ModelConfig,
  batch_size: int,
  seq_len: int,
  predictions_per_seq: int,
  *,
  factorised_embeddings: bool = False,
) -> float:
  """The layers, pooler / sentence head, and the MLM head at the masked positions only.

  The head's transform and the tied vocabulary projection are counted at
  ``predictions_per_seq`` positions per sequence, which is where this code saves work over
  heads that score every position. ``factorised_embeddings`` (ALBERT: E-wide tables; shared
  layers cost as much per application) adds the E -> H projection per token and makes the
  head H -> E -> vocab.
  """
  d, f, layers = config.hidden_size, config.intermediate_size, config.num_layers
  tokens = batch_size * seq_len
  per_token_layer = 2 * (4 * d * d + 2 * d * f) + 2 * 2 * seq_len * d
  encoder = tokens * layers * per_token_layer + batch_size * 2 * (d * d + 2 * d)  # + pooler/NSP
  e = config.embedding_width if factorised_embeddings else d
  if factorised_embeddings:
    encoder += tokens * 2 * e * d
  mlm = batch_size * predictions_per_seq * 2 * (d * e + e * config.vocab_size)
  return 3.0 * (encoder + mlm)


def factorised_masked_lm_train_flops(
  config: ModelConfig, batch_size: int, seq_len: int, predictions_per_seq: int
) -> float:
  """`masked_lm_train_flops` with factorised embeddings (ALBERT)."""
  return masked_lm_train_flops(
    config, batch_size, seq_len, predictions_per_seq, factorised_embeddings=True
  )
