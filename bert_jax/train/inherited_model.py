"""The model a run builds when its config leaves model keys unset: the checkpoint's.

A fine-tuning config (`bert_jax.default_config.finetune_config`) leaves every architecture key
of its ``model`` section unset. Each unset key takes its value from the ``config.json`` of the
run the model comes from: the workdir's own run when it resumes, else ``init_from`` (a
pretraining run, a fine-tuned run or converted weights). A key set in the config (by the config
file or a ``--config.model.*`` flag; in a nested section such as ``model.recurrence``, key by
key) wins; whether it fits the checkpoint is checked against the checkpoint's parameters
(`bert_jax.train.init_from.check_fits`), which names the keys to drop or change. Keys the source does not record keep the `ModelConfig` defaults (BERT-base).
"""

from bert_jax import workdir as workdir_lib
from bert_jax.models import families
from bert_jax.models.config import MODEL_SIZES, stored_model_section

# The keys of a stored model section, the families' sections included.
_MODEL_KEYS = frozenset(families.model_config_from_dict({}).to_dict())


def explicit_model_keys(model_section: dict) -> dict:
  """The keys a ``model`` section sets, with a ``size`` preset expanded into its keys.

  Args:
    model_section: the config's ``model`` section as a plain dict (None = unset).

  Returns:
    {key: value} of the set keys; an unknown ``size`` stays for `model_config_from_dict` to
    report.
  """
  explicit = _set_keys(model_section)
  size = explicit.get("size")
  if size in MODEL_SIZES:
    del explicit["size"]
    num_layers, hidden, heads = MODEL_SIZES[size]
    explicit.setdefault("num_layers", num_layers)
    explicit.setdefault("hidden_size", hidden)
    explicit.setdefault("num_heads", heads)
    explicit.setdefault("intermediate_size", 4 * hidden)
  return explicit


def _set_keys(section: dict) -> dict:
  """``section`` without its unset (None) keys; a nested section keeps its set keys, if any."""
  kept = {}
  for key, value in section.items():
    if isinstance(value, dict):
      value = _set_keys(value) or None
    if value is not None:
      kept[key] = value
  return kept


def source_model_section(init_from, workdir: str | None) -> dict:
  """The stored model section the unset keys take: the workdir's own when it resumes, else
  ``init_from``'s ({} with neither).

  Args:
    init_from: the run's ``init_from`` ("" = none), or its `workdir.InitFromChain`.
    workdir: the run's workdir; when it holds checkpoints it is the source (resume).

  Raises:
    UserInputError: ``init_from`` is set but holds no checkpoint.
  """
  if workdir is not None:
    own = workdir_lib.Workdir.at(workdir)
    if own.has_checkpoints() and own.config_json.exists():
      return stored_model_section(own.read_config())
  return stored_model_section(workdir_lib.InitFromChain.of(init_from).first()[1])


def resolve_model_section(model_section: dict, init_from, workdir: str | None = None) -> dict:
  """The ``model`` section with every unset key filled from the source run's config.json.

  Args:
    model_section: the config's ``model`` section as a plain dict (None = unset).
    init_from: the run's ``init_from`` ("" = none), or its `workdir.InitFromChain`.
    workdir: the run's workdir; when it holds checkpoints it is the source (resume).

  Returns:
    A section for `bert_jax.models.families.model_config_from_dict`.
  """
  explicit = explicit_model_keys(model_section)
  stored = source_model_section(init_from, workdir)
  inherited = {k: v for k, v in stored.items() if k in _MODEL_KEYS}
  merged = {**inherited, **explicit}
  for key, value in explicit.items():
    # A nested section's set keys win one by one; its other keys are the source's.
    if isinstance(value, dict) and isinstance(inherited.get(key), dict):
      merged[key] = {**inherited[key], **value}
  return merged
