"""ELECTRA's generator size and objective weight (``model.electra``), and the generator's config.

The generator is a small masked-LM encoder beside the discriminator (Clark et al. 2020): the
same depth, a fraction of the width (1/4 for small and large, 1/3 for base), and the
discriminator's embeddings (so its embedding width is the discriminator's ``embedding_size``).
"""

import dataclasses

from bert_jax import names
from bert_jax.config_fields import option
from bert_jax.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class ElectraOptions:
  """Options of ``model.family='electra'`` (ignored by other families)."""

  generator_fraction: float = option(
    0.25,
    help="Generator width / discriminator width (paper: 1/4 small and large, 1/3 base); "
    "hidden size, heads and FFN width scale by it unless set explicitly below.",
  )
  generator_hidden_size: int = option(0, help="Generator hidden size; 0 = from the fraction.")
  generator_num_heads: int = option(0, help="Generator attention heads; 0 = from the fraction.")
  generator_intermediate_size: int = option(
    0, help="Generator feed-forward width; 0 = from the fraction."
  )
  generator_num_layers: int = option(0, help="Generator depth; 0 = the discriminator's.")
  lone_generator: bool = option(
    False,
    help="The model is a generator alone (Hugging Face's ElectraForMaskedLM, as the published "
    "electra-*-generator checkpoints): the trunk is the generator at the model's own sizes and "
    "pretraining trains its masked LM only (no discriminator, no replaced-token detection).",
  )
  rtd_weight: float = option(
    50.0, help="Lambda of loss = MLM + lambda * replaced-token-detection loss (paper: 50)."
  )
  sampling_temperature: float = option(
    1.0,
    help="The generator's logits are divided by it before sampling (the original code's "
    "temperature; paper: 1). Above 1, rarer tokens are sampled: an easier task.",
  )

  def __post_init__(self):
    if not self.sampling_temperature > 0:
      raise UserInputError(
        f"model.electra.sampling_temperature={self.sampling_temperature} must be > 0 "
        "(the paper samples at 1)"
      )

  def check_model(self, config):
    """An electra ``config`` (a `ModelConfig`) must have a generator that fits.

    Raises:
      UserInputError: as `generator_config`.
    """
    if config.family == names.ELECTRA:
      generator_config(config)


# The config section(s) of family electra (`family_spec.Family.sections`).
SECTIONS = {"electra": ElectraOptions}


def generator_config(config):
  """The generator's `ModelConfig`, derived from the discriminator's.

  Args:
    config: the discriminator's `bert_jax.models.config.ModelConfig` (family electra).

  Returns:
    The same config with the generator's layers, width, heads and FFN width, and the
    discriminator's embedding width (the embeddings are shared); its family is BERT's (a
    plain encoder), so it is not itself checked as an ELECTRA pair. A ``lone_generator``
    model is its own generator: its sizes are kept.

  Raises:
    UserInputError: the generator would be wider or deeper than the discriminator, or its
      width is not divisible by its head count.
  """
  options = config.electra
  if options.lone_generator:
    return dataclasses.replace(config, family=names.BERT, embedding_size=config.embedding_width)
  fraction = options.generator_fraction
  if not 0 < fraction <= 1:
    raise UserInputError(
      f"model.electra.generator_fraction={fraction} must be in (0, 1]; the paper uses 0.25 or 1/3"
    )
  hidden = options.generator_hidden_size or max(1, round(config.hidden_size * fraction))
  heads = options.generator_num_heads or max(1, round(config.num_heads * fraction))
  intermediate = options.generator_intermediate_size or max(
    1, round(config.intermediate_size * fraction)
  )
  num_layers = options.generator_num_layers or config.num_layers
  if hidden > config.hidden_size or num_layers > config.num_layers:
    raise UserInputError(
      f"the ELECTRA generator (hidden {hidden}, {num_layers} layers) is larger than the "
      f"discriminator (hidden {config.hidden_size}, {config.num_layers} layers); set "
      "model.electra.generator_hidden_size / generator_num_layers no larger (paper: 1/4-1/3 width)"
    )
  if hidden % heads:
    raise UserInputError(
      f"the ELECTRA generator's hidden size {hidden} is not divisible by its {heads} heads; set "
      "model.electra.generator_hidden_size and generator_num_heads explicitly"
    )
  return dataclasses.replace(
    config,
    family=names.BERT,
    hidden_size=hidden,
    num_heads=heads,
    intermediate_size=intermediate,
    num_layers=num_layers,
    embedding_size=config.embedding_size or config.hidden_size,
  )
