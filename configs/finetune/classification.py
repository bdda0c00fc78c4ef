"""Classification (or regression) on your own CSV/TSV file, with BERT's GLUE recipe.

  python -m bert_jax.main --config=configs/finetune/classification.py --workdir=/tmp/reviews \
      --config.init_from=/runs/minilm_converted \
      --config.data.train_path=reviews/train.tsv --config.data.eval_path=reviews/dev.tsv \
      --config.data.text_a_column=review --config.data.label_column=sentiment \
      --config.data.label_names=neg,pos

The files need a header line naming their columns; ``.csv`` files are comma-separated with CSV
quoting, anything else tab-separated. ``label_names`` lists the label values in id order
(``neg,pos``: neg is 0, pos is 1); leave it empty for regression on a float label. Sentence
pairs: add ``--config.data.text_b_column=<column>``. An unlabelled ``--config.data.test_path``
(the sentence columns, an optional ``index`` column) is predicted at the end of training into
``<workdir>/predictions/``. The model (shape, vocab, family) is init_from's.
"""

from bert_jax.default_config import finetune_config


def get_config():
  config = finetune_config("classification")
  config.data.glue_task = ""  # A custom file, described by the keys below.
  config.data.text_a_column = "text"  # Header name of the (first) sentence.
  config.data.text_b_column = ""  # Header name of the second sentence; empty = single.
  config.data.label_column = "label"  # Header name of the label.
  config.data.label_names = ()  # Label values in id order ("neg,pos"); empty = regression.
  config.data.max_seq_length = 128  # BERT's GLUE length.
  config.global_batch_size = 32  # BERT paper: 32.
  config.optimizer.learning_rate = 2e-5  # Paper: best of {5e-5, 4e-5, 3e-5, 2e-5} on dev.
  config.num_train_epochs = 3.0  # Paper: 3 epochs.
  config.warmup_fraction = 0.1  # Linear warmup over the first 10% of steps, then decay.
  return config
