"""GLUE fine-tuning with the BERT paper's recipe: batch 32, lr 2e-5, 3 epochs, 10% warmup, L=128.

  python -m bert_jax.main --config=configs/finetune/glue.py:mrpc --workdir=/tmp/mrpc \
      --config.init_from=/path/to/pretrained_or_converted_workdir \
      --config.data.train_path=glue_data/MRPC/train.tsv \
      --config.data.eval_path=glue_data/MRPC/dev.tsv

or, with the TFDS copy prepared once (`tfds build glue/mrpc --data_dir=DIR`):

      ... --config.data.tfds_name=glue/mrpc --config.data.tfds_data_dir=DIR

The argument is a GLUE task: cola, sst2, mrpc, qqp, stsb (regression), mnli (eval on the
matched dev set), mnli_mismatched (the same training, eval on the mismatched dev set; with
files pass dev_mismatched.tsv), qnli, rte, wnli. The model section is BERT-base (uncased,
30522-entry vocab); for other checkpoints pass their model keys (e.g. --config.model.size=tiny
--config.model.vocab_size=8192). The vocab defaults to the one init_from was trained with.
"""

from bert_jax.default_config import finetune_config


def get_config(arg="mrpc"):
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
