"""Hugging Face's FlaxBertForPreTraining (FlaxAlbertForPreTraining for ALBERT,
FlaxDistilBertForMaskedLM for DistilBERT) trained the same way: `Family.hf_baseline` of those
families, the baseline of `tools/benchmark --baseline=hf_flax`.

Same architecture, same optimizer (optax AdamW with the same mask and schedule), same loss
(masked LM at the masked positions + NSP / SOP), same dropout; the difference measured is the model
implementation: Hugging Face scores every position with the vocabulary projection.
"""

import jax
import jax.numpy as jnp
import optax

from bert_jax.models.config import ModelConfig


def _distilbert_model_and_loss(transformers, model_config: ModelConfig, seed: int):
  """FlaxDistilBertForMaskedLM and its masked-LM loss (no token types, no sentence head)."""
  hf_config = transformers.DistilBertConfig(
    vocab_size=model_config.vocab_size,
    dim=model_config.hidden_size,
    n_layers=model_config.num_layers,
    n_heads=model_config.num_heads,
    hidden_dim=model_config.intermediate_size,
    max_position_embeddings=model_config.max_position_embeddings,
    dropout=model_config.hidden_dropout_rate,
    attention_dropout=model_config.attention_dropout_rate,
  )
  with jax.numpy_rank_promotion("allow"):
    model = transformers.FlaxDistilBertForMaskedLM(
      hf_config, seed=seed, dtype=jnp.dtype(model_config.dtype)
    )

  def loss_fn(params, batch, rng):
    logits_BLV = model(
      batch["input_ids"],
      attention_mask=batch["input_mask"],
      params=params,
      dropout_rng=rng,
      train=True,
    ).logits
    logits_BPV = jnp.take_along_axis(logits_BLV, batch["masked_lm_positions"][:, :, None], axis=1)
    weights_BP = batch["masked_lm_weights"]
    mlm = optax.softmax_cross_entropy_with_integer_labels(logits_BPV, batch["masked_lm_ids"])
    return jnp.sum(mlm * weights_BP) / jnp.maximum(jnp.sum(weights_BP), 1.0)

  return model, loss_fn


def distilbert_masked_lm(model_config: ModelConfig, optimizer, seed: int = 0):
  """(jitted step(params, opt_state, batch, rng) -> (params, opt_state, loss), state) of
  FlaxDistilBertForMaskedLM (masked LM only)."""
  import transformers  # pylint: disable=g-import-not-at-top

  model, loss_fn = _distilbert_model_and_loss(transformers, model_config, seed)
  return _jitted_step(model.params, loss_fn, optimizer)


def bert_or_albert_config(transformers, model_config: ModelConfig, albert: bool = False, **extra):
  """Hugging Face's AlbertConfig (``albert``) or BertConfig of ``model_config``.

  Args:
    transformers: the imported ``transformers`` package.
    model_config: the bert_jax model it describes.
    albert: an ALBERT (factorised embeddings, shared layer groups).
    **extra: more config keywords (e.g. ``attn_implementation``).
  """
  sizes = {"embedding_size": model_config.embedding_width} if albert else {}
  groups = (
    {
      "num_hidden_groups": 1
      if model_config.albert.layer_sharing == "all"
      else model_config.num_layers
    }
    if albert
    else {}
  )
  return (transformers.AlbertConfig if albert else transformers.BertConfig)(
    **sizes,
    **groups,
    **extra,
    vocab_size=model_config.vocab_size,
    hidden_size=model_config.hidden_size,
    num_hidden_layers=model_config.num_layers,
    num_attention_heads=model_config.num_heads,
    intermediate_size=model_config.intermediate_size,
    max_position_embeddings=model_config.max_position_embeddings,
    hidden_dropout_prob=model_config.hidden_dropout_rate,
    attention_probs_dropout_prob=model_config.attention_dropout_rate,
    hidden_act=model_config.hidden_act,
  )


def bert_pretraining(model_config: ModelConfig, optimizer, seed: int = 0):
  """`distilbert_masked_lm` for FlaxBertForPreTraining (masked LM + NSP)."""
  return _pretraining(model_config, optimizer, seed, albert=False)


def albert_pretraining(model_config: ModelConfig, optimizer, seed: int = 0):
  """`distilbert_masked_lm` for FlaxAlbertForPreTraining (masked LM + SOP)."""
  return _pretraining(model_config, optimizer, seed, albert=True)


def _pretraining(model_config: ModelConfig, optimizer, seed: int, albert: bool):
  import transformers  # pylint: disable=g-import-not-at-top

  hf_config = bert_or_albert_config(transformers, model_config, albert=albert)
  model_class = (
    transformers.FlaxAlbertForPreTraining if albert else transformers.FlaxBertForPreTraining
  )
  with jax.numpy_rank_promotion("allow"):
    # The same compute dtype as bert_jax's step (params stay float32 in both).
    model = model_class(hf_config, seed=seed, dtype=jnp.dtype(model_config.dtype))
  params = model.params

  def loss_fn(params, batch, rng):
    outputs = model(
      batch["input_ids"],
      attention_mask=batch["input_mask"],
      token_type_ids=batch["token_type_ids"],
      params=params,
      dropout_rng=rng,
      train=True,
    )
    logits_BPV = jnp.take_along_axis(
      outputs.prediction_logits, batch["masked_lm_positions"][:, :, None], axis=1
    )
    weights_BP = batch["masked_lm_weights"]
    mlm = optax.softmax_cross_entropy_with_integer_labels(logits_BPV, batch["masked_lm_ids"])
    sentence_logits = outputs.sop_logits if albert else outputs.seq_relationship_logits
    nsp = optax.softmax_cross_entropy_with_integer_labels(
      sentence_logits, batch["next_sentence_labels"]
    )
    return jnp.sum(mlm * weights_BP) / jnp.maximum(jnp.sum(weights_BP), 1.0) + jnp.mean(nsp)

  return _jitted_step(params, loss_fn, optimizer)


def _jitted_step(params, loss_fn, optimizer):
  opt_state = optimizer.init(params)

  def step(params, opt_state, batch, rng):
    with jax.numpy_rank_promotion("allow"):  # Hugging Face relies on implicit promotion.
      loss, grads = jax.value_and_grad(loss_fn)(params, batch, rng)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  return jax.jit(step, donate_argnums=(0, 1)), (params, opt_state)
