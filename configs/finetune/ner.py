"""Named-entity recognition on CoNLL-2003 (BERT paper, section 5.3), BERT-base, fine-tuned.

  python -m bert_jax.main --config=configs/finetune/ner.py --workdir=/tmp/ner \
      --config.init_from=/ckpt/bert_base_cased \
      --config.data.train_path=/data/conll2003/train.txt \
      --config.data.eval_path=/data/conll2003/valid.txt

or, with TFDS's conll2003 prepared once where there is network (`tfds build conll2003`):
--config.data.tfds_name=conll2003 (eval split "dev"). POS tagging or chunking of the same files:
--config.data.conll_label_column=1 (POS, scored by accuracy) or 2 (chunks, entity F1).

The paper fine-tunes with the grid of its appendix A.3 (batch 16/32, lr 5e-5/3e-5/2e-5, 2-4
epochs); this picks batch 32, lr 5e-5, 3 epochs. It also feeds the maximal document context
around each sentence; here each sentence is a sequence of its own (longer ones are windowed).
"""

from bert_jax.default_config import finetune_config


def get_config(arg=None):
  del arg
  config = finetune_config("tagging")  # Token classification, 3 epochs, 10% warmup.
  config.global_batch_size = 32  # Sentences per update (paper grid: 16 or 32).
  config.num_train_epochs = 3.0  # Paper grid: 2, 3 or 4.
  config.warmup_fraction = 0.1  # Linear warmup over the first 10% of steps, as in BERT.
  config.optimizer.learning_rate = 5e-5  # Peak (paper grid: 5e-5, 3e-5, 2e-5).
  # The model's shape and family are init_from's (BERT-base without init_from). Its vocab is
  # BERT-base cased's (the paper uses a case-preserving model for NER): 28996 WordPieces; for
  # another checkpoint pass its size, e.g. --config.model.vocab_size=30522.
  config.model.vocab_size = 28996
  config.data.lowercase = False  # Cased: capitals mark entities. True for uncased models.
  config.data.max_seq_length = 128  # WordPieces per sequence, [CLS] and [SEP] included.
  # A sentence longer than 126 pieces is split into windows whose starts are 64 pieces apart;
  # each word is scored in the window where it has the most context.
  config.data.doc_stride = 64
  config.data.conll_label_column = -1  # CoNLL-2003 columns: word POS chunk NER; -1 = NER.
  config.data.label_names = ()  # Empty: the tags of the train data (TFDS: its 9 NER tags).
  config.data.tfds_eval_split = "dev"  # TFDS conll2003's splits are train / dev / test.
  return config
