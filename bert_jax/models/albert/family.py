"""The albert family's `family_spec.Family` record (registered in `models/families.py`)."""

from bert_jax import names
from bert_jax.errors import UserInputError
from bert_jax.models import flops
from bert_jax.models.albert import hf_config as albert_config
from bert_jax.models.albert import hf_weights as albert_weights
from bert_jax.models.albert.model import AlbertEncoder, AlbertForPreTraining
from bert_jax.models.blocks import FeedForwardSublayer
from bert_jax.models.family_spec import Family, module_interop


def _check_config(config):
  """Sharing modes the stacks cannot run (`model.py`)."""
  if config.albert.layer_sharing == "none":
    return
  if config.reversible:
    raise UserInputError(
      f"model.reversible=True needs model.albert.layer_sharing='none' for family albert "
      f"(got {config.albert.layer_sharing!r}); reversible layers each hold their own weights"
    )
  if config.scan_layers and config.albert.layer_sharing != "all":
    raise UserInputError(
      "model.scan_layers=True with model.albert.layer_sharing="
      f"{config.albert.layer_sharing!r} is not "
      "supported; use model.albert.layer_sharing 'all' or 'none', or scan_layers=False"
    )


FAMILY = Family(
  names.ALBERT,
  AlbertEncoder,
  AlbertForPreTraining,
  train_flops=flops.factorised_masked_lm_train_flops,
  hidden_state_modules=(FeedForwardSublayer,),  # Partly shared stacks end a layer with it.
  hf=module_interop("ALBERT", albert_config, albert_weights),
  check_config=_check_config,
)
