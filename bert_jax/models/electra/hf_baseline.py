"""Hugging Face's FlaxElectraForMaskedLM + FlaxElectraForPreTraining trained as ELECTRA, as a
benchmark baseline for ``model.family='electra'``.

The same recipe as `bert_jax.tasks.electra_pretraining`: the generator reads the
discriminator's embeddings (its own copy is replaced by them on every call, so they are one set
of parameters), tokens are sampled from its softmax at the masked positions without a
gradient, and the loss is MLM + rtd_weight * RTD, with the same optimizer and dropout. The
difference measured is the implementation: Hugging Face's generator scores every position with
the vocabulary projection.
"""

import jax
import jax.numpy as jnp
import optax

from bert_jax.models.config import ModelConfig
from bert_jax.models.electra.options import generator_config


def _hf_config(transformers, config: ModelConfig, embedding_size: int):
  return transformers.ElectraConfig(
    vocab_size=config.vocab_size,
    embedding_size=embedding_size,
    hidden_size=config.hidden_size,
    num_hidden_layers=config.num_layers,
    num_attention_heads=config.num_heads,
    intermediate_size=config.intermediate_size,
    max_position_embeddings=config.max_position_embeddings,
    type_vocab_size=config.type_vocab_size,
    hidden_dropout_prob=config.hidden_dropout_rate,
    attention_probs_dropout_prob=config.attention_dropout_rate,
    hidden_act="gelu",
  )


def electra_pretraining(model_config: ModelConfig, optimizer, seed: int = 0):
  """Returns (jitted step(params, opt_state, batch, rng) -> (params, opt_state, loss), state)."""
  import transformers  # pylint: disable=g-import-not-at-top

  embedding_size = model_config.embedding_size or model_config.hidden_size
  with jax.numpy_rank_promotion("allow"):
    discriminator = transformers.FlaxElectraForPreTraining(
      _hf_config(transformers, model_config, embedding_size),
      seed=seed,
      dtype=jnp.dtype(model_config.dtype),
    )
    generator = transformers.FlaxElectraForMaskedLM(
      _hf_config(transformers, generator_config(model_config), embedding_size),
      seed=seed + 1,
      dtype=jnp.dtype(model_config.dtype),
    )
  generator_params = dict(generator.params)
  generator_params["electra"] = {
    k: v for k, v in generator_params["electra"].items() if k != "embeddings"
  }
  params = {"discriminator": discriminator.params, "generator": generator_params}
  opt_state = optimizer.init(params)
  rtd_weight = model_config.electra.rtd_weight

  def loss_fn(params, batch, rng):
    dropout_rng, sampling_rng, disc_rng = jax.random.split(rng, 3)
    shared = params["discriminator"]["electra"]["embeddings"]
    gen_params = dict(params["generator"])
    gen_params["electra"] = dict(gen_params["electra"], embeddings=shared)
    mask_BL = batch["input_mask"]
    logits_BLV = generator(
      batch["input_ids"],
      attention_mask=mask_BL,
      token_type_ids=batch["token_type_ids"],
      params=gen_params,
      dropout_rng=dropout_rng,
      train=True,
    ).logits
    positions_BP, weights_BP = batch["masked_lm_positions"], batch["masked_lm_weights"]
    logits_BPV = jnp.take_along_axis(logits_BLV, positions_BP[:, :, None], axis=1)
    mlm = optax.softmax_cross_entropy_with_integer_labels(logits_BPV, batch["masked_lm_ids"])
    mlm_loss = jnp.sum(mlm * weights_BP) / jnp.maximum(jnp.sum(weights_BP), 1.0)
    sampled_BP = jax.random.categorical(sampling_rng, jax.lax.stop_gradient(logits_BPV))
    rows_BP = jnp.broadcast_to(jnp.arange(positions_BP.shape[0])[:, None], positions_BP.shape)
    drop_BP = jnp.where(weights_BP > 0, positions_BP, mask_BL.shape[1])
    original_BL = batch["input_ids"].at[rows_BP, drop_BP].set(batch["masked_lm_ids"], mode="drop")
    corrupted_BL = batch["input_ids"].at[rows_BP, drop_BP].set(sampled_BP, mode="drop")
    rtd_logits_BL = discriminator(
      corrupted_BL,
      attention_mask=mask_BL,
      token_type_ids=batch["token_type_ids"],
      params=params["discriminator"],
      dropout_rng=disc_rng,
      train=True,
    ).logits
    labels_BL = (corrupted_BL != original_BL).astype(jnp.float32)
    real_BL = (mask_BL > 0).astype(jnp.float32)
    rtd = optax.sigmoid_binary_cross_entropy(rtd_logits_BL, labels_BL)
    rtd_loss = jnp.sum(rtd * real_BL) / jnp.maximum(jnp.sum(real_BL), 1.0)
    return mlm_loss + rtd_weight * rtd_loss

  def step(params, opt_state, batch, rng):
    with jax.numpy_rank_promotion("allow"):  # Hugging Face relies on implicit promotion.
      loss, grads = jax.value_and_grad(loss_fn)(params, batch, rng)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  return jax.jit(step, donate_argnums=(0, 1)), (params, opt_state)
