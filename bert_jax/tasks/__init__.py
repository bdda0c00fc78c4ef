"""Objectives and fine-tuning tasks, above `bert_jax.data` / `bert_jax.models`, below `train`.

pretraining.py      the pretraining objective (its data is `bert_jax.data`'s pipeline)
<task>/             one folder per fine-tuning ``config.task`` (`bert_jax.names`): reader,
                    features, data object, model (trunk + shared head), objective, metrics
registry.py         ``config.task`` -> its objective and data, by ordinary imports
interface.py        what the trainer and the tools ask of every task (`Task`) and its defaults
task_settings.py    the slice of the run settings that the registry reads
feature_batches.py  host batches of feature arrays, shared by every fine-tuning task
finetune_config.py  the data section of a fine-tuning config
weighted_rows.py    what the fine-tuning objectives share (rows weighted by example_weight)
trunk.py            the encoder every fine-tuning model is built on
"""
