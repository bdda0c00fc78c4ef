"""Task dispatch: ``config.task`` -> the objective (``make_task``) and its data (``make_data``).

Every task of `bert_jax.names.TASKS` is one entry here, imported like any other module:

  task             package (data object, objective)
  pretraining      bert_jax.data.pretraining_pipeline and the family's objective
                   (`Family.pretraining_objective` -> `PRETRAINING_OBJECTIVES`);
                   bert_jax.data.segment_batches, bert_jax.tasks.causal_lm for
                   data.objective clm; bert_jax.data.parallel_pairs for an objective
                   with its own data, `OWN_DATA`)
  distillation     bert_jax.data.pretraining_pipeline, bert_jax.tasks.distillation
  classification   bert_jax.tasks.classification
  tagging          bert_jax.tasks.tagging
  span_qa          bert_jax.tasks.span_qa
  multiple_choice  bert_jax.tasks.multiple_choice
  multitask        bert_jax.tasks.multitask (members of the types above on one encoder)

A fine-tuning package's ``data.make_data(data_config, tokenizer)`` returns a
`bert_jax.tasks.feature_batches.FeatureData`; every ``make_task(model_config, data_config,
data)`` returns the objective (an `interface.Task`), sized from ``data`` where the data decides
it (e.g. a tag set read from the train file). Both read only the run's `TaskSettings`.
"""

from bert_jax import names
from bert_jax import workdir as workdir_lib
from bert_jax.data import default_corpus, segment_batches, tokenization
from bert_jax.errors import UserInputError
from bert_jax.models import families, family_spec
from bert_jax.tasks import (
  causal_lm,
  distillation,
  electra_pretraining,
  pretraining,
  xlm_pretraining,
)
from bert_jax.tasks.classification import data as classification_data
from bert_jax.tasks.classification import objective as classification_objective
from bert_jax.tasks.interface import Task
from bert_jax.tasks.multiple_choice import data as multiple_choice_data
from bert_jax.tasks.multiple_choice import objective as multiple_choice_objective
from bert_jax.tasks.multitask import data as multitask_data
from bert_jax.tasks.multitask import objective as multitask_objective
from bert_jax.tasks.span_qa import data as span_qa_data
from bert_jax.tasks.span_qa import objective as span_qa_objective
from bert_jax.tasks.tagging import data as tagging_data
from bert_jax.tasks.tagging import objective as tagging_objective
from bert_jax.tasks.task_settings import TaskSettings

# `Family.pretraining_objective` -> make_task of that objective.
PRETRAINING_OBJECTIVES = {
  family_spec.MASKED_LM: pretraining.make_task,
  family_spec.PERMUTATION_LM: pretraining.make_permutation_lm_task,
  family_spec.REPLACED_TOKEN_DETECTION: electra_pretraining.make_task,
  family_spec.CROSS_LINGUAL_LM: xlm_pretraining.make_task,
}


def _pairs_data(data_config, model_config):
  # tf.data builds this pipeline: TensorFlow loads here, not for the tools that only compile.
  from bert_jax.data import parallel_pairs  # pylint: disable=g-import-not-at-top

  return parallel_pairs.PairsData(data_config, model_config)


# `Family.pretraining_objective` -> the data class of an objective whose every data.objective
# (here also 'clm') and data are its own.
OWN_DATA = {
  family_spec.CROSS_LINGUAL_LM: _pairs_data,
}


def _make_pretraining_task(model_config, data_config, data=None):
  """The one place that picks a pretraining objective: an objective with its own data takes
  every data.objective; else the causal LM for data.objective='clm', else the objective of
  ``model.family``."""
  family = families.get(model_config.family)
  if family.pretraining_objective in OWN_DATA:
    return PRETRAINING_OBJECTIVES[family.pretraining_objective](model_config, data_config, data)
  if data_config.objective == names.TLM or data_config.pairs_path:
    raise UserInputError(
      f"data.objective='tlm' and data.pairs_path are XLM's; model.family={model_config.family!r}"
      " pretrains on data.corpus_paths: set model.family='xlm' or unset them"
    )
  if data_config.objective == names.CLM:
    return causal_lm.make_task(model_config, data_config, data)
  if not family.pretraining_objective:
    raise UserInputError(
      f"model.family={family.name!r} is a causal LM with memory and has no masked-LM "
      "pretraining; pretrain it with data.objective='clm'"
    )
  return PRETRAINING_OBJECTIVES[family.pretraining_objective](model_config, data_config, data)


# config.task -> make_task(model_config, data_config, data) of its objective.
MAKE_TASK = {
  names.PRETRAINING: _make_pretraining_task,
  names.CLASSIFICATION: classification_objective.make_task,
  names.TAGGING: tagging_objective.make_task,
  names.SPAN_QA: span_qa_objective.make_task,
  names.MULTIPLE_CHOICE: multiple_choice_objective.make_task,
  names.MULTITASK: multitask_objective.make_task,
  names.DISTILLATION: distillation.make_task,  # Also takes settings=<its config section>.
}
# Fine-tuning config.task -> make_data(data_config, tokenizer) of its data object.
MAKE_FINETUNING_DATA = {
  names.CLASSIFICATION: classification_data.make_data,
  names.TAGGING: tagging_data.make_data,
  names.SPAN_QA: span_qa_data.make_data,
  names.MULTIPLE_CHOICE: multiple_choice_data.make_data,
  names.MULTITASK: multitask_data.make_data,
}


def make_task(settings: TaskSettings, data=None) -> Task:
  """The task object of ``settings.task``.

  Args:
    settings: the run's `TaskSettings` (`bert_jax.train.settings.RunSettings.task_settings`).
    data: the data object of `make_data` (fine-tuning tasks need it; pretraining does not).
  """
  task = settings.task
  if data is None and task not in names.PRETRAINING_DATA_TASKS:
    raise ValueError(f"task {task!r} is sized by its data; pass make_data's result")
  extra = {"settings": settings.distillation} if task == names.DISTILLATION else {}
  return MAKE_TASK[task](settings.model, settings.data, data, **extra)


def make_data(settings: TaskSettings):
  """The data object of ``settings.task`` (pretraining corpus or task examples).

  Raises:
    UserInputError: the vocab does not match ``model.vocab_size``, or the task's files are
      missing or malformed (from the task's reader).
  """
  objective = families.get(settings.model.family).pretraining_objective
  if settings.task == names.PRETRAINING and objective in OWN_DATA:
    # Refuses a data.objective the family has not first.
    PRETRAINING_OBJECTIVES[objective](settings.model, settings.data)
    return OWN_DATA[objective](settings.data, settings.model)
  if settings.task in names.PRETRAINING_DATA_TASKS and settings.data.objective == names.CLM:
    causal_lm.make_task(settings.model, settings.data)  # Refuses a model without memory first.
    return segment_batches.SegmentData(
      settings.data,
      model_vocab_size=settings.model.vocab_size,
      global_batch_size=settings.global_batch_size,
    )
  if settings.task in names.PRETRAINING_DATA_TASKS:
    # Refuses a task it cannot build (distillation's teacher) before the corpus is tokenised.
    make_task(settings)
    # tf.data builds this pipeline: TensorFlow loads here, not for the tools that only compile
    # or time the step (hosts without TensorFlow can run those).
    from bert_jax.data import pretraining_pipeline  # pylint: disable=g-import-not-at-top

    return pretraining_pipeline.PretrainingData(
      settings.data, model_vocab_size=settings.model.vocab_size
    )
  if settings.data.test_path and settings.task != names.CLASSIFICATION:
    raise UserInputError(
      f"data.test_path is set but task {settings.task!r} writes no test predictions "
      "(only classification does; span_qa writes its eval predictions); unset it"
    )
  vocab_path = resolve_vocab_path(settings.data.vocab_path, settings.init_from)
  tokenizer = tokenization.load_model_tokenizer(
    vocab_path, lowercase=settings.data.lowercase, model_vocab_size=settings.model.vocab_size
  )
  return MAKE_FINETUNING_DATA[settings.task](settings.data, tokenizer)


def resolve_vocab_path(vocab_path: str, init_from) -> str:
  """The vocab a fine-tuning run tokenises with.

  An explicit ``data.vocab_path`` wins; else ``<init_from>/vocab.txt`` (converted weights carry
  their vocab); else the vocab that ``<init_from>/config.json`` names, or, if it names none,
  the one its own ``init_from`` resolves to (a model fine-tuned twice keeps its vocab); else the
  embedded default vocab. Paths a config.json stores relative to its workdir are read so.

  Args:
    vocab_path: the run's ``data.vocab_path`` ("" = unset).
    init_from: the run's ``init_from``, or the `workdir.InitFromChain` already read for it.

  Raises:
    UserInputError: ``init_from`` (or one it leads to) holds no checkpoint.
  """
  if vocab_path:
    return vocab_path
  for run, stored in workdir_lib.InitFromChain.of(init_from):
    if run.vocab.exists():
      return str(run.vocab)
    vocab_path = run.resolve(stored.get("data", {}).get("vocab_path", ""))
    if vocab_path:
      return vocab_path
  return default_corpus.default_vocab_path()


def resolve_lowercase(lowercase: bool | None, init_from) -> bool:
  """Whether a fine-tuning run lowercases its text (an uncased model).

  An explicit ``data.lowercase`` wins; else the setting ``<init_from>/config.json`` records
  (converted weights record their tokenizer's), or, if it records none, the one its own
  ``init_from`` resolves to; else True (uncased, as BERT-base uncased).

  Args:
    lowercase: the run's ``data.lowercase`` (None = unset).
    init_from: the run's ``init_from``, or the `workdir.InitFromChain` already read for it.

  Raises:
    UserInputError: ``init_from`` (or one it leads to) holds no checkpoint.
  """
  if lowercase is None:
    lowercase = next(
      (
        stored["data"]["lowercase"]
        for _, stored in workdir_lib.InitFromChain.of(init_from)
        if stored.get("data", {}).get("lowercase") is not None
      ),
      None,
    )
  return True if lowercase is None else bool(lowercase)
