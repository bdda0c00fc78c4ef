"""Task dispatch: ``config.task`` -> the objective (``make_task``) and its data (``make_data``).

Fine-tuning tasks live in their own modules, imported by name when a run needs them:

  task             data module (``make_data``)    task module (``make_task``)
  classification   bert_jax.data.glue_data        bert_jax.tasks.classification
  tagging          bert_jax.data.conll_data       bert_jax.tasks.tagging
  span_qa          bert_jax.data.squad_data       bert_jax.tasks.span_qa
  multiple_choice  bert_jax.data.swag_data        bert_jax.tasks.multiple_choice

A data module's ``make_data(data_config, tokenizer)`` returns an object with ``batches``,
``eval_metrics`` and ``num_train_examples`` (see `bert_jax.data.finetune_batches`); a task
module's ``make_task(model_config, data_config, data)`` returns the objective, sized from
``data`` where the data decides it (e.g. a tag set read from the train file).
"""

import importlib
import json
from typing import NamedTuple

from bert_jax.data import default_corpus, pretraining_pipeline, tokenization
from bert_jax.errors import UserInputError
from bert_jax.tasks.pretraining import PretrainingTask
from bert_jax.train import init_from as init_from_lib


class FinetuneModules(NamedTuple):
  data: str  # Has make_data(data_config, tokenizer).
  task: str  # Has make_task(model_config, data_config, data).


FINETUNE_MODULES = {
    "classification": FinetuneModules("bert_jax.data.glue_data", "bert_jax.tasks.classification"),
    "tagging": FinetuneModules("bert_jax.data.conll_data", "bert_jax.tasks.tagging"),
    "span_qa": FinetuneModules("bert_jax.data.squad_data", "bert_jax.tasks.span_qa"),
    "multiple_choice": FinetuneModules("bert_jax.data.swag_data",
                                       "bert_jax.tasks.multiple_choice"),
}


def make_task(settings, data=None):
  """The task object of ``settings.trainer.task``.

  Args:
    settings: `bert_jax.train.settings.RunSettings`.
    data: the data object of `make_data` (fine-tuning tasks need it; pretraining does not).
  """
  task = settings.trainer.task
  if task == "pretraining":
    # NSP and SOP share the 2-way sentence head; objective "none" trains MLM alone.
    return PretrainingTask(settings.model, settings.data.max_seq_length,
                           settings.data.max_predictions_per_seq,
                           use_nsp=settings.data.objective != "none")
  if data is None:
    raise ValueError(f"task {task!r} is sized by its data; pass make_data's result")
  return _import(FINETUNE_MODULES[task].task, task).make_task(settings.model, settings.data,
                                                              data)


def make_data(settings):
  """The data object of ``settings.trainer.task`` (pretraining corpus or task examples).

  Raises:
    UserInputError: the vocab does not match ``model.vocab_size``, or the task's files are
      missing or malformed (from the task's reader).
  """
  if settings.trainer.task == "pretraining":
    return pretraining_pipeline.PretrainingData(settings.data,
                                                model_vocab_size=settings.model.vocab_size)
  vocab_path = resolve_vocab_path(settings.data.vocab_path, settings.trainer.init_from)
  tokenizer = tokenization.load_tokenizer(vocab_path, lowercase=settings.data.lowercase)
  if tokenizer.vocab_size != settings.model.vocab_size:
    raise UserInputError(
        f"vocab {vocab_path} has {tokenizer.vocab_size} entries but model.vocab_size is "
        f"{settings.model.vocab_size}; set model.vocab_size={tokenizer.vocab_size} or "
        "data.vocab_path to the vocab the pretrained model was trained with")
  task = settings.trainer.task
  return _import(FINETUNE_MODULES[task].data, task).make_data(settings.data, tokenizer)


def resolve_vocab_path(vocab_path: str, init_from: str) -> str:
  """The vocab a fine-tuning run tokenises with.

  An explicit ``data.vocab_path`` wins; else ``<init_from>/vocab.txt`` (converted weights carry
  their vocab); else the vocab that ``<init_from>/config.json`` names, or, if it names none,
  the one its own ``init_from`` resolves to (a model fine-tuned twice keeps its vocab); else the
  embedded default vocab.
  """
  seen = set()
  while not vocab_path and init_from:
    workdir = init_from_lib.find_checkpoint(init_from).parent.parent
    if (workdir / "vocab.txt").exists():
      return str(workdir / "vocab.txt")
    if workdir in seen or not (workdir / "config.json").exists():
      break
    seen.add(workdir)
    stored = json.loads((workdir / "config.json").read_text())
    vocab_path = stored.get("data", {}).get("vocab_path", "")
    init_from = stored.get("init_from", "")
  return vocab_path or default_corpus.default_vocab_path()


def _import(name: str, task: str):
  try:
    return importlib.import_module(name)
  except ModuleNotFoundError as error:
    if error.name != name:
      raise
    raise UserInputError(f"task={task!r} needs {name}, which this installation lacks; "
                         f"choose one of the tasks it has") from None
