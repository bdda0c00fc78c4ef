"""ELECTRA (Clark et al. 2020): a discriminator encoder and a small generator sharing embeddings.

Parameter layout (one tree, so checkpoints, resume and sharding treat the pair as one model):

  bert/                  the discriminator encoder (`ElectraEncoder`): embeddings of width
                         ``embedding_size``, ``embeddings_project`` to ``hidden_size`` when
                         they differ, the encoder; fine-tuning restores it as the trunk
  discriminator_head/    dense + GELU + one logit per position (replaced or original)
  generator/             the generator's ``embeddings_project`` and encoder; it reads the
                         discriminator's embeddings (token, position, token type, LayerNorm)
  generator_head/        dense to ``embedding_size`` + GELU + LayerNorm, then the shared word
                         table and an output bias

A ``model.electra.lone_generator`` model (a converted ``ElectraForMaskedLM``, e.g. the
published electra-*-generator checkpoints) has no discriminator: ``bert/`` is the generator's
trunk at the model's own sizes and ``generator_head/`` its masked-LM head, so fine-tuning and
the tools read it like any ELECTRA trunk.

Hugging Face's ``ElectraForPreTraining`` / ``ElectraForMaskedLM`` map onto these names
(`models/electra/hf.py`).
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import flops, heads, layers
from bert_jax.models.config import ModelConfig
from bert_jax.models.electra.options import generator_config
from bert_jax.models.embeddings import Embeddings, position_ids
from bert_jax.models.encoder import Encoder

# The PRNG stream the generator's samples are drawn from (`train/step.py` provides it).
SAMPLING_RNG = "sampling"


def _projection(config: ModelConfig):
  """``embeddings_project`` (embedding width -> hidden size), or None when they are equal."""
  if (config.embedding_size or config.hidden_size) == config.hidden_size:
    return None
  return layers.dense(config, config.hidden_size, (names.MLP, names.EMBED), "embeddings_project")


class GeneratorEncoder(nn.Module):
  """The generator's projection and encoder stack, on the discriminator's embeddings."""

  config: ModelConfig  # The generator's (`options.generator_config`).
  deterministic: bool = True

  @nn.compact
  def __call__(self, x_BLE, input_mask_BL):
    projection = _projection(self.config)
    x_BLG = x_BLE if projection is None else projection(x_BLE)
    return Encoder(self.config, self.deterministic, name="encoder")(x_BLG, input_mask_BL)


class ElectraEncoder(nn.Module):
  """The discriminator trunk: embeddings, projection, encoder. No pooler (ELECTRA has none).

  Attributes:
    config: the model configuration (the discriminator's).
    deterministic: disables dropout (evaluation).
  """

  config: ModelConfig
  deterministic: bool = True

  def setup(self):
    self.embeddings = Embeddings(self.config, self.deterministic, name="embeddings")
    self.embeddings_project = _projection(self.config)
    self.encoder = Encoder(self.config, self.deterministic, name="encoder")

  def embed(self, input_ids_BL, token_type_ids_BL):
    """The (shared) embeddings [B, L, embedding_size], after LayerNorm and dropout."""
    position_ids_BL = position_ids(self.config, input_ids_BL)
    return self.embeddings(input_ids_BL, token_type_ids_BL, position_ids_BL)

  def __call__(self, input_ids_BL, token_type_ids_BL, input_mask_BL):
    """Encodes a batch (arguments as `bert_jax.models.bert.BertEncoder`).

    Returns:
      (sequence_output [B, L, H], the first token's output [B, H]): fine-tuning heads take
      the latter, as Hugging Face's ELECTRA classification head does.
    """
    x_BLE = self.embed(input_ids_BL, token_type_ids_BL)
    x_BLH = x_BLE if self.embeddings_project is None else self.embeddings_project(x_BLE)
    x_BLH = self.encoder(x_BLH, input_mask_BL)
    return x_BLH, x_BLH[:, 0]

  def attend(self, x_BPE):
    return self.embeddings.attend(x_BPE)


class DiscriminatorHead(nn.Module):
  """Dense + GELU + a dense layer to one logit per position: was this token replaced?"""

  config: ModelConfig

  @nn.compact
  def __call__(self, x_BLH):
    config = self.config
    h_BLH = layers.gelu(
      layers.dense(config, config.hidden_size, (names.EMBED, names.MLP), "dense")(x_BLH)
    )
    logits_BL1 = layers.dense(config, 1, (names.MLP, names.CLASSES), "prediction")(h_BLH)
    return logits_BL1[..., 0].astype(jnp.float32)


class GeneratorHead(nn.Module):
  """Dense to the embedding width + GELU + LayerNorm, then the tied word table and a bias."""

  config: ModelConfig  # The generator's (its embedding_size is the shared tables' width).

  @nn.compact
  def __call__(self, x_BPG, attend):
    config = self.config
    h_BPE = layers.gelu(
      layers.dense(config, config.embedding_size, (names.EMBED, names.MLP), "dense")(x_BPG)
    )
    h_BPE = layers.layer_norm(config, "layer_norm")(h_BPE)
    return attend(h_BPE) + heads.output_bias(self, config)


def _replace_at(ids_BL, positions_BP, values_BP, weights_BP):
  """``ids_BL`` with ``values_BP`` written at the real (weight > 0) predicted positions."""
  length = ids_BL.shape[1]
  # Padding predictions point past the end, and mode="drop" skips them.
  positions_BP = jnp.where(weights_BP > 0, positions_BP, length)
  rows_BP = jnp.broadcast_to(jnp.arange(ids_BL.shape[0])[:, None], positions_BP.shape)
  return ids_BL.at[rows_BP, positions_BP].set(values_BP.astype(ids_BL.dtype), mode="drop")


class ElectraForPreTraining(nn.Module):
  """Generator and discriminator trained jointly (replaced-token detection).

  Called with the masked positions, their original ids and weights (training), the generator
  predicts the masked tokens, tokens are sampled from its softmax at
  ``model.electra.sampling_temperature`` (no gradient flows through the sampling) and written
  into the sequence, and the discriminator labels every position as original or replaced.
  Called with only the first three arguments (inspection and the Hugging Face equivalence
  tests), both models read the same ``input_ids``: the generator's logits at every position
  and the discriminator's logits come back without sampling.
  """

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(
    self,
    input_ids_BL,
    token_type_ids_BL,
    input_mask_BL,
    masked_lm_positions_BP=None,
    masked_lm_ids_BP=None,
    masked_lm_weights_BP=None,
  ):
    """Returns float32 ``mlm_logits`` [B, P, V] and ``rtd_logits`` [B, L], and when sampling,
    the int ``rtd_labels`` [B, L] (1 = the sampled token differs from the original). A lone
    generator returns ``mlm_logits`` only (at ``masked_lm_positions_BP``, or everywhere)."""
    gen_config = generator_config(self.config)
    bert = ElectraEncoder(self.config, self.deterministic, name="bert")
    if self.config.electra.lone_generator:
      x_BLG, _ = bert(input_ids_BL, token_type_ids_BL, input_mask_BL)
      x_BPG = heads.at_positions(x_BLG, masked_lm_positions_BP)
      return {"mlm_logits": GeneratorHead(gen_config, name="generator_head")(x_BPG, bert.attend)}
    generator = GeneratorEncoder(gen_config, self.deterministic, name="generator")
    gen_head = GeneratorHead(gen_config, name="generator_head")
    disc_head = DiscriminatorHead(self.config, name="discriminator_head")

    g_BLG = generator(bert.embed(input_ids_BL, token_type_ids_BL), input_mask_BL)
    if masked_lm_positions_BP is None:
      mlm_logits_BLV = gen_head(g_BLG, bert.attend)
      x_BLH, _ = bert(input_ids_BL, token_type_ids_BL, input_mask_BL)
      return {"mlm_logits": mlm_logits_BLV, "rtd_logits": disc_head(x_BLH)}

    g_BPG = heads.at_positions(g_BLG, masked_lm_positions_BP)
    mlm_logits_BPV = gen_head(g_BPG, bert.attend)
    temperature = self.config.electra.sampling_temperature
    sampled_BP = jax.random.categorical(
      self.make_rng(SAMPLING_RNG), jax.lax.stop_gradient(mlm_logits_BPV) / temperature, axis=-1
    )
    # The generator saw [MASK] (or a random / kept token) at the predicted positions; the
    # discriminator sees the sample there and the original token everywhere else.
    original_BL = _replace_at(
      input_ids_BL, masked_lm_positions_BP, masked_lm_ids_BP, masked_lm_weights_BP
    )
    corrupted_BL = _replace_at(
      input_ids_BL, masked_lm_positions_BP, sampled_BP, masked_lm_weights_BP
    )
    x_BLH, _ = bert(corrupted_BL, token_type_ids_BL, input_mask_BL)
    return {
      "mlm_logits": mlm_logits_BPV,
      "rtd_logits": disc_head(x_BLH),
      "rtd_labels": (corrupted_BL != original_BL).astype(jnp.int32),
    }


def train_flops(config: ModelConfig, batch_size: int, seq_len: int, predictions_per_seq: int):
  """Pretraining: the discriminator and its per-token head at every position (none for a lone
  generator), the generator's encoder at every position and its head + vocabulary projection
  at the masked ones.
  Fine-tuning (no masked positions): the discriminator as any masked-LM encoder."""
  if not predictions_per_seq:
    return flops.masked_lm_train_flops(config, batch_size, seq_len, 0)
  gen = generator_config(config)
  tokens = batch_size * seq_len
  embedding = config.embedding_size or config.hidden_size
  discriminator = flops.encoder_flops(config, tokens, seq_len) + tokens * 2 * (
    config.hidden_size**2 + config.hidden_size
  )
  if config.electra.lone_generator:  # `gen` is the model itself; there is no discriminator.
    discriminator = 0
  generator = flops.encoder_flops(gen, tokens, seq_len) + batch_size * predictions_per_seq * 2 * (
    gen.hidden_size * embedding + embedding * config.vocab_size
  )
  return 3.0 * (discriminator + generator)
