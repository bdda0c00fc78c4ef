"""What a model family is: the `Family` record that `models/families.py` registers.

Everything above the models layer (trainer, tasks, tools) reads a family's behaviour off this
record instead of testing ``model.family``; `tests/test_architecture.py` enforces it.
"""

import dataclasses
from collections.abc import Callable, Mapping

import flax.linen as nn

# `Family.pretraining_objective` values: what the family's pretraining model is trained on when
# ``data.objective`` is not 'clm' (tasks/registry.py maps each to its task).
MASKED_LM = "masked_lm"  # MLM at the masked positions (+ the NSP / SOP head if it has one).
PERMUTATION_LM = "permutation_lm"  # XLNet: the masked positions predicted in a random order.
REPLACED_TOKEN_DETECTION = "replaced_token_detection"  # ELECTRA: generator + discriminator.
# XLM: MLM, CLM or TLM (every data.objective) over its own data (`data/parallel_pairs.py`).
CROSS_LINGUAL_LM = "cross_lingual_lm"
OBJECTIVES = (MASKED_LM, PERMUTATION_LM, REPLACED_TOKEN_DETECTION, CROSS_LINGUAL_LM)


@dataclasses.dataclass(frozen=True)
class HfInterop:
  """A family's Hugging Face conversion, both directions (`tools/convert.py`).

  Attributes:
    model_type: ``config.json``'s ``model_type`` that selects the family on import.
    label: the family's name in messages ("ALBERT").
    model_config: ``(config.json object, source, pair_values) -> ModelConfig``, checked
      before any weights are read; ``pair_values``: the paired directory's config.json
      object or None.
    read_params: ``(state dict, ModelConfig, source, pair_state) -> params``.
    write: ``(params, ModelConfig) -> ({subdirectory: (config.json object, state)}, rows)``;
      subdirectory "" is the output directory itself; ``rows`` are the exported
      `weight_table.Row`s (what is left out is logged).
    pair: the flag naming a second Hugging Face directory the import needs (ELECTRA's
      ``generator``); "" = one directory.
    read_alone: ``(config.json object, state, config source, weights source, pair directory
      or None) -> (ModelConfig, params)`` of a state that converts without its pair
      (ELECTRA's lone generator), or None when this state needs the pair; None: every
      state of a paired family needs it.
  """

  model_type: str
  label: str
  model_config: Callable
  read_params: Callable
  write: Callable
  pair: str = ""
  read_alone: Callable | None = None


def table_interop(
  model_type: str,
  label: str,
  *,
  model_config: Callable,
  config_json: Callable,
  rows: Callable,
  params_from_hf: Callable,
  hf_from_params: Callable,
  architecture: Callable,
) -> HfInterop:
  """The `HfInterop` of a family that converts to one directory through a weight table.

  Args:
    model_type: ``config.json``'s ``model_type``.
    label: the family's name in messages.
    model_config: (config.json object, source) -> `ModelConfig`.
    config_json: (`ModelConfig`, architecture) -> config.json object.
    rows: `ModelConfig` -> the `weight_table.Row` table.
    params_from_hf: (state dict, `ModelConfig`, source=) -> nested numpy params.
    hf_from_params: (params, `ModelConfig`) -> {Hugging Face name: array}.
    architecture: params -> the ``transformers`` class that loads them.
  """

  def read_model_config(values, source, pair_values=None):
    del pair_values  # One directory.
    return model_config(values, source)

  def read_params(state, model, source, pair_state=None):
    del pair_state
    return params_from_hf(state, model, source=source)

  def write(params, model):
    config = config_json(model, architecture(params))
    return {"": (config, hf_from_params(params, model))}, rows(model)

  return HfInterop(model_type, label, read_model_config, read_params, write)


def module_interop(label: str, *modules) -> HfInterop:
  """`table_interop` of a family's interop modules that name their parts as `table_interop`'s
  arguments (``MODEL_TYPE``, ``model_config``, ``config_json``, ``rows``, ``params_from_hf``,
  ``hf_from_params``, ``architecture``; e.g. `models/xlm/hf.py`).

  Args:
    label: the family's name in messages.
    *modules: the interop modules; each part is taken from the first that has it.
  """

  def part(name):
    return getattr(next(m for m in modules if hasattr(m, name)), name)

  return table_interop(
    part("MODEL_TYPE"),
    label,
    model_config=part("model_config"),
    config_json=part("config_json"),
    rows=part("rows"),
    params_from_hf=part("params_from_hf"),
    hf_from_params=part("hf_from_params"),
    architecture=part("architecture"),
  )


@dataclasses.dataclass(frozen=True)
class Family:
  """One model family: everything about it that code outside its own modules needs.

  Attributes:
    name: the ``model.family`` value (a member of `names.FAMILIES`).
    encoder: module class built as ``encoder(config, deterministic, name=...)`` and called on
      ``(input_ids_BL, token_type_ids_BL, input_mask_BL)``; returns ``(sequence_BLD,
      pooled_BD)``. Fine-tuning task models put their heads on it; `tools/embed` runs it.
    pretraining_model: module class built as ``pretraining_model(config, deterministic)``;
      its trunk is the ``encoder`` under the scope ``bert`` (`tasks/trunk.py`), so fine-tuning
      restores it from a pretraining checkpoint by that name.
    pretraining_objective: one of `OBJECTIVES` (trained when ``data.objective`` is not
      'clm'), or "" when the family pretrains only as a causal LM.
    sentence_head: the pretraining model has the 2-way NSP / SOP head (``nsp_logits``);
      without it the family pretrains with ``data.objective="none"`` only.
    causal_lm_model: module class of the causal LM with segment memory
      (``data.objective='clm'``), built like ``pretraining_model`` and called on
      ``(input_ids_BL, token_type_ids_BL, document_ids_BL, memory=[per-layer [B, N, D]],
      memory_ids_BN=[B, N])``; returns ``logits``, the next ``memory`` and its
      ``memory_ids``. None: no segment memory. With it the encoder has a ``streams`` method
      (`tools/embed_recurrent.py`).
    plain_examples: examples are a line's tokens alone, no [CLS] / [SEP] and no pairs
      (a causal LM over token streams).
    hidden_state_modules: module classes, besides the shared `Embeddings` and `EncoderBlock`,
      whose outputs are hidden states for `tools/embed` (ALBERT's FFN half-layer).
    train_flops: ``(config, batch_size, seq_len, predictions_per_seq) -> float``, matmul FLOPs
      of one forward + backward step (`models/flops.py`; MFU in train/flops.py).
    hf: the Hugging Face conversion (`HfInterop`), or None if the family has none.
    languages: ``ModelConfig -> tuple of names``, the languages whose embeddings the encoder
      adds (XLM's ``lang2id`` order); the encoder then takes their ids as the keyword
      ``language_ids_BL``. None: the family has no language embeddings.
    sections: its family-only config sections, name -> options dataclass declared with
      `config_fields.option` (``{"electra": ElectraOptions}`` is ``model.electra``); every
      `ModelConfig` holds every family's (`family_sections.FamilySections`), each checked
      against the whole config by its ``check_model(config)`` when it has one. Families may
      share a section (the same class under the same name).
    check_config: ``ModelConfig -> None``, raising a one-line `UserInputError` for shared
      model keys the family cannot compute (run on every config of the family); None: none.
  """

  name: str
  encoder: type[nn.Module]
  pretraining_model: type[nn.Module]
  train_flops: Callable
  pretraining_objective: str = MASKED_LM
  sentence_head: bool = True
  causal_lm_model: type[nn.Module] | None = None
  plain_examples: bool = False
  hidden_state_modules: tuple = ()
  hf: HfInterop | None = None
  languages: Callable | None = None
  sections: Mapping[str, type] = dataclasses.field(default_factory=dict)
  check_config: Callable | None = None

  @property
  def has_memory(self) -> bool:
    """The family keeps a memory of earlier segments (Transformer-XL recurrence)."""
    return self.causal_lm_model is not None
