"""Multi-task fine-tuning (MT-DNN style): several tasks on one shared encoder, one head each.

  python -m bert_jax.main --config=configs/finetune/multitask.py:mrpc,rte --workdir=/tmp/mt \
      --config.init_from=/path/to/pretrained_or_converted_workdir \
      --config.data.tasks.mrpc.train_path=glue_data/MRPC/train.tsv \
      --config.data.tasks.mrpc.eval_path=glue_data/MRPC/dev.tsv \
      --config.data.tasks.rte.train_path=glue_data/RTE/train.tsv \
      --config.data.tasks.rte.eval_path=glue_data/RTE/dev.tsv

The argument lists the members, comma-separated: a GLUE task name (cola sst2 mrpc qqp stsb mnli
qnli rte wnli) is a classification member of that GLUE layout; ``name=type`` is a member of
another type (``ner=tagging``, ``squad=span_qa``) whose data keys you pass as
``--config.data.tasks.<name>.<key>=...`` (with TFDS: ``...tasks.mrpc.tfds_name=glue/mrpc``).
Each member's eval metrics are logged as ``<name>/<metric>`` (``mrpc/f1``, ``rte/accuracy``).
One member becomes a single-task workdir with

  python -m bert_jax.tools.export_task --workdir=/tmp/mt --task=mrpc --output=/tmp/mt_mrpc

which ``--config=configs/finetune/glue.py:mrpc --config.init_from=/tmp/mt_mrpc`` fine-tunes
further or evaluates.
"""

from bert_jax.default_config import multitask_config


def _member(item):
  name, _, task = item.partition("=")
  if task:
    return name, task, {}
  # A GLUE task name: its layout, labels and official metrics (checked when the run starts).
  return name, "classification", {"glue_task": name}


def get_config(arg="mrpc,rte"):
  config = multitask_config([_member(item) for item in arg.split(",") if item])
  config.data.sampling = "proportional"  # MT-DNN: batches drawn in proportion to task size.
  config.data.temperature = 2.0  # Used by sampling=temperature only.
  config.global_batch_size = 32  # Rows of one member per step (BERT paper: 32).
  config.optimizer.learning_rate = 5e-5  # MT-DNN: 5e-5.
  config.num_train_epochs = 3.0  # Epochs over all members' train rows together.
  config.warmup_fraction = 0.1  # Linear warmup over the first 10% of steps, then decay.
  return config
