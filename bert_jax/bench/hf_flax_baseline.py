"""transformers' Flax version of a family's pretraining model, trained the same way: the
baseline of `bench/benchmark --baseline=hf_flax`.

The classes and sizes come from the family's Hugging Face export (`hf_export`): BERT's
FlaxBertForPreTraining, ALBERT's FlaxAlbertForPreTraining, DistilBERT's
FlaxDistilBertForMaskedLM, ELECTRA's FlaxElectraForPreTraining with its FlaxElectraForMaskedLM
generator. Same optimizer (the run's optax AdamW with its mask and schedule), same loss (masked
LM at the masked positions, + NSP / SOP where the family has the sentence head; ELECTRA's MLM +
``rtd_weight`` x replaced-token detection as `tasks/electra_pretraining`), same dropout; the
difference measured is the implementation: Hugging Face scores every position with the
vocabulary projection.
"""

import inspect

import jax
import jax.numpy as jnp
import optax

from bert_jax.bench import hf_export
from bert_jax.errors import UserInputError
from bert_jax.models import families
from bert_jax.models.config import ModelConfig
from bert_jax.models.family_spec import REPLACED_TOKEN_DETECTION


def _flax_class(transformers, architecture: str, model_config: ModelConfig):
  """transformers' Flax class of ``architecture`` (``BertForPreTraining``)."""
  name = "Flax" + architecture
  if not hasattr(transformers, name):
    raise UserInputError(
      f"--baseline=hf_flax: transformers has no {name} for model.family="
      f"{model_config.family!r}; drop --baseline"
    )
  return getattr(transformers, name)


def check_config(model_config: ModelConfig):
  """Refuses a family transformers has no Flax model of, before anything compiles.

  Raises:
    UserInputError: no Hugging Face export, or no Flax class for it.
  """
  import transformers  # pylint: disable=g-import-not-at-top

  for architecture in hf_export.architectures(model_config).values():
    _flax_class(transformers, architecture, model_config)


def _flax_models(model_config: ModelConfig, seed: int) -> dict:
  """{export subdirectory: transformers Flax model} with fresh weights."""
  import transformers  # pylint: disable=g-import-not-at-top

  exported = sorted(hf_export.exported_configs(model_config).items())
  models = {}
  for offset, (directory, values) in enumerate(exported):
    model_class = _flax_class(transformers, values["architectures"][0], model_config)
    with jax.numpy_rank_promotion("allow"):
      # The same compute dtype as bert_jax's step (params stay float32 in both).
      models[directory] = model_class(
        hf_export.hf_config(transformers, values),
        seed=seed + offset,
        dtype=jnp.dtype(model_config.dtype),
      )
  return models


def train_step(model_config: ModelConfig, optimizer, seed: int = 0):
  """Hugging Face's Flax pretraining step of ``model_config``'s family.

  Args:
    model_config: the bert_jax model it mirrors.
    optimizer: the run's optax optimizer.
    seed: seed of the initial weights (and the generator's, + 1).

  Returns:
    ``(jitted step(params, opt_state, batch, rng) -> (params, opt_state, loss),
    (params, opt_state))``.

  Raises:
    UserInputError: transformers has no Flax model of the family.
  """
  family = families.get(model_config.family)
  models = _flax_models(model_config, seed)
  if family.pretraining_objective == REPLACED_TOKEN_DETECTION:
    params, loss_fn = _replaced_token_detection(models, family.hf.pair, model_config)
  else:
    (model,) = models.values()
    params, loss_fn = model.params, _masked_lm_loss(model, family.sentence_head)
  return _jitted_step(params, loss_fn, optimizer)


def _masked_lm(logits_BLV, batch):
  logits_BPV = jnp.take_along_axis(logits_BLV, batch["masked_lm_positions"][:, :, None], axis=1)
  weights_BP = batch["masked_lm_weights"]
  mlm = optax.softmax_cross_entropy_with_integer_labels(logits_BPV, batch["masked_lm_ids"])
  return jnp.sum(mlm * weights_BP) / jnp.maximum(jnp.sum(weights_BP), 1.0), logits_BPV


def _type_ids(model, batch) -> dict:
  # DistilBERT's models take no token types.
  if "token_type_ids" in inspect.signature(model.__call__).parameters:
    return {"token_type_ids": batch["token_type_ids"]}
  return {}


def _masked_lm_loss(model, sentence_head: bool):
  """Masked LM (+ NSP / SOP with ``sentence_head``) of a ``*ForPreTraining`` / ``*ForMaskedLM``."""

  def loss_fn(params, batch, rng):
    outputs = model(
      batch["input_ids"],
      attention_mask=batch["input_mask"],
      **_type_ids(model, batch),
      params=params,
      dropout_rng=rng,
      train=True,
    )
    # Output 0 is the vocabulary logits, 1 the NSP / SOP logits (their names differ by class).
    loss, _ = _masked_lm(outputs[0], batch)
    if sentence_head:
      loss += jnp.mean(
        optax.softmax_cross_entropy_with_integer_labels(outputs[1], batch["next_sentence_labels"])
      )
    return loss

  return loss_fn


def _replaced_token_detection(models, generator_directory, model_config: ModelConfig):
  """ELECTRA's recipe: the generator reads the discriminator's embeddings (its own copy is
  replaced by them on every call, so they are one set of parameters), tokens are sampled from
  its softmax at the masked positions without a gradient, and the loss is MLM + rtd_weight x
  RTD."""
  generator = models.pop(generator_directory)
  (discriminator,) = models.values()
  prefix = discriminator.base_model_prefix
  generator_params = dict(generator.params)
  generator_params[prefix] = {
    k: v for k, v in generator_params[prefix].items() if k != "embeddings"
  }
  params = {"discriminator": discriminator.params, "generator": generator_params}
  rtd_weight = model_config.electra.rtd_weight

  def loss_fn(params, batch, rng):
    dropout_rng, sampling_rng, disc_rng = jax.random.split(rng, 3)
    shared = params["discriminator"][prefix]["embeddings"]
    gen_params = dict(params["generator"])
    gen_params[prefix] = dict(gen_params[prefix], embeddings=shared)
    mask_BL = batch["input_mask"]
    logits_BLV = generator(
      batch["input_ids"],
      attention_mask=mask_BL,
      token_type_ids=batch["token_type_ids"],
      params=gen_params,
      dropout_rng=dropout_rng,
      train=True,
    ).logits
    mlm_loss, logits_BPV = _masked_lm(logits_BLV, batch)
    positions_BP, weights_BP = batch["masked_lm_positions"], batch["masked_lm_weights"]
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

  return params, loss_fn


def _jitted_step(params, loss_fn, optimizer):
  opt_state = optimizer.init(params)

  def step(params, opt_state, batch, rng):
    with jax.numpy_rank_promotion("allow"):  # Hugging Face relies on implicit promotion.
      loss, grads = jax.value_and_grad(loss_fn)(params, batch, rng)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  return jax.jit(step, donate_argnums=(0, 1)), (params, opt_state)
