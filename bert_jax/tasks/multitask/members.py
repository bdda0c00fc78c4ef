"""The task types a multi-task member may have, through their own packages' entry points.

Each member is built exactly as a single-task run of its type builds it: the data object from
``<task>.data.make_data`` and the objective (model, loss, metrics) from
``<task>.objective.make_task``. Multiple choice is not a member type: its rows hold C
sequences, so its batches cannot share the members' [B, L] schema.
"""

from bert_jax import names
from bert_jax.tasks.classification import data as classification_data
from bert_jax.tasks.classification import objective as classification_objective
from bert_jax.tasks.span_qa import data as span_qa_data
from bert_jax.tasks.span_qa import objective as span_qa_objective
from bert_jax.tasks.tagging import data as tagging_data
from bert_jax.tasks.tagging import objective as tagging_objective

# Member task type -> make_data(data_config, tokenizer) of its data object.
MAKE_DATA = {
  names.CLASSIFICATION: classification_data.make_data,
  names.TAGGING: tagging_data.make_data,
  names.SPAN_QA: span_qa_data.make_data,
}
# Member task type -> make_task(model_config, data_config, data) of its objective.
MAKE_TASK = {
  names.CLASSIFICATION: classification_objective.make_task,
  names.TAGGING: tagging_objective.make_task,
  names.SPAN_QA: span_qa_objective.make_task,
}
