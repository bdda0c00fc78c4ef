"""SQuAD v1.1 / v2.0 span QA with BERT's SQuAD recipe: length 384, doc stride 128, max query 64.

  python -m bert_jax.main --config=configs/finetune/squad.py --workdir=/tmp/squad \
      --config.init_from=/path/to/pretrained_or_converted_workdir \
      --config.data.train_path=train-v1.1.json --config.data.eval_path=dev-v1.1.json

SQuAD 2.0 (unanswerable questions, null answer against null_score_diff_threshold):

  python -m bert_jax.main --config=configs/finetune/squad.py:v2 ... \
      --config.data.train_path=train-v2.0.json --config.data.eval_path=dev-v2.0.json

or, with the TFDS copy prepared once (`tfds build squad/v2.0 --data_dir=DIR`):

      ... --config.data.tfds_name=squad/v2.0 --config.data.tfds_data_dir=DIR

Eval reports SQuAD's official EM and F1 in percent ("exact", "f1"; v2.0 adds "HasAns_*" and
"NoAns_*"). The model (shape, vocab, family) is init_from's; without init_from, BERT-base. The
vocab defaults to the one init_from was trained with.
"""

from bert_jax.default_config import finetune_config
from bert_jax.errors import UserInputError

_VERSIONS = {None: False, "": False, "v1": False, "v1.1": False, "v2": True, "v2.0": True}


def get_config(arg=None):
  if arg not in _VERSIONS:
    raise UserInputError(
      f"configs/finetune/squad.py:{arg} is unknown; use squad.py (SQuAD "
      "v1.1) or squad.py:v2 (SQuAD 2.0)"
    )
  config = finetune_config("span_qa")
  config.data.version_2_with_negative = _VERSIONS[arg]
  config.data.max_seq_length = 384  # BERT's SQuAD length: [CLS] question [SEP] window [SEP].
  config.data.doc_stride = 128  # Tokens between the starts of overlapping context windows.
  config.data.max_query_length = 64  # Question tokens kept.
  config.data.n_best_size = 20  # Start / end candidates per window in post-processing.
  config.data.max_answer_length = 30  # Longest answer, in tokens.
  # v2.0: answer "" when the null score beats the best span by more than this; the original
  # BERT tunes it on dev (typically between -1 and -5).
  config.data.null_score_diff_threshold = 0.0
  # The paper: batch 32, lr 5e-5, 3 epochs (v1.1); batch 48, lr 5e-5, 2 epochs (v2.0). Google's
  # run_squad recipe, for base and large alike: lr 3e-5, 2 epochs. We take batch 32 with the
  # recipe's lr and epochs, the setting that holds across model sizes.
  config.global_batch_size = 32
  config.optimizer.learning_rate = 3e-5
  config.num_train_epochs = 2.0
  config.warmup_fraction = 0.1  # Linear warmup over the first 10% of steps, then decay.
  return config
