"""GLUE fine-tuning with the BERT paper's recipe: batch 32, lr 2e-5, 3 epochs, 10% warmup, L=128.

  python -m bert_jax.main --config=configs/finetune/glue.py:mrpc --workdir=/tmp/mrpc \
      --config.init_from=/path/to/pretrained_or_converted_workdir \
      --config.data.train_path=glue_data/MRPC/train.tsv \
      --config.data.eval_path=glue_data/MRPC/dev.tsv

or, with the TFDS copy prepared once (`tfds build glue/mrpc --data_dir=DIR`):

      ... --config.data.tfds_name=glue/mrpc --config.data.tfds_data_dir=DIR

The argument is a GLUE task: cola, sst2, mrpc, qqp, stsb (regression), mnli (eval on the
matched dev set), mnli_mismatched (the same training, eval on the mismatched dev set; with
files pass dev_mismatched.tsv), qnli, rte, wnli. Your own CSV/TSV: configs/finetune/classification.py
(``glue.py:custom`` is the same). The model (shape, vocab, family) is init_from's; without
init_from, BERT-base. The vocab defaults to the one init_from was trained with.
"""

import importlib.util
import pathlib

from bert_jax.default_config import finetune_config

# classification.py sits beside this file; configs/ is not a package, so load it by path.
_SPEC = importlib.util.spec_from_file_location(
  "classification_config", pathlib.Path(__file__).with_name("classification.py")
)
classification = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(classification)


def get_config(arg="mrpc"):
  if arg == "custom":
    return classification.get_config()
  # Unknown names fail when the run starts (data.glue_task is checked there), as one line.
  task = "mnli" if arg == "mnli_mismatched" else arg
  config = finetune_config("classification")
  config.data.glue_task = task  # Fixes the file layout, the labels and the GLUE metrics.
  config.data.max_seq_length = 128  # BERT's GLUE length.
  config.global_batch_size = 32  # BERT paper: 32.
  config.optimizer.learning_rate = 2e-5  # Paper: best of {5e-5, 4e-5, 3e-5, 2e-5} on dev.
  config.num_train_epochs = 3.0  # Paper: 3 epochs.
  config.warmup_fraction = 0.1  # Linear warmup over the first 10% of steps, then decay.
  if task == "mnli":
    # TFDS names the two MNLI dev sets; GLUE's files are dev_matched.tsv / dev_mismatched.tsv.
    config.data.tfds_eval_split = (
      "validation_mismatched" if arg == "mnli_mismatched" else "validation_matched"
    )
  return config
