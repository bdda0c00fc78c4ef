"""A family's Hugging Face state dicts: what their names add to its `weight_table.Row` table.

``transformers`` saves a trunk class (``BertModel``) without the prefix its head classes
(``BertForPreTraining``) put on the same tensors, stores tied tensors twice (the MLM decoder
repeats the word table) and sometimes saves buffers. A family declares that once as an
`HfState`; its ``params_from_hf`` / ``hf_from_params`` are the record's methods.
"""

import dataclasses
from collections.abc import Callable, Mapping

from bert_jax.models.config import ModelConfig
from bert_jax.models.interop import weight_table


@dataclasses.dataclass(frozen=True)
class HfState:
  """How one family's state dicts name their tensors beyond the `Row` table.

  Attributes:
    rows: ``ModelConfig -> [Row]`` in the head class's names.
    label: the family's name in messages ("BERT").
    prefix: the trunk's prefix in the head class's names (``"bert."``).
    trunk_parts: first parts of the trunk class's names, which lack ``prefix``.
    tied: ``{copy: original}`` of tensors stored twice (`weight_table.fold_tied_copies`),
      dropped once checked.
    ignored: other names known and deliberately not converted (buffers).
    our_shapes: ``ModelConfig -> {path: shape}`` of the params, e.g. `weight_table.param_shapes`
      of the family's pretraining model.
  """

  rows: Callable
  label: str
  prefix: str = ""
  trunk_parts: tuple = ()
  tied: Mapping = dataclasses.field(default_factory=dict)
  ignored: tuple = ()
  our_shapes: Callable = dataclasses.field(kw_only=True)

  def params_from_hf(self, state, config: ModelConfig, source: str = "the state dict"):
    """Builds bert_jax params (unscanned) from a state dict of the trunk or a head class.

    Args:
      state: Hugging Face name -> array.
      config: the bert_jax model the weights must fit.
      source: where ``state`` came from, for messages.

    Returns:
      Nested dict of float32 numpy arrays of the groups the checkpoint holds.

    Raises:
      UserInputError: tensors are missing, unexpected or of another shape (one message), or
        a tied copy differs from its original.
    """
    tensors = {
      (self.prefix + n if n.startswith(self.trunk_parts) else n): v for n, v in state.items()
    }
    weight_table.fold_tied_copies(tensors, self.tied, source, self.label)
    return weight_table.import_state(
      self.rows(config),
      tensors,
      config,
      source=source,
      ignored=frozenset(self.tied) | frozenset(self.ignored),
      our_shapes=self.our_shapes(config),
    )

  def hf_from_params(self, params, config: ModelConfig):
    """The inverse of `params_from_hf`: Hugging Face names -> numpy arrays, for the parts
    ``params`` holds (the names ``save_pretrained`` writes; tied copies left out)."""
    return weight_table.export_params(self.rows(config), params)
