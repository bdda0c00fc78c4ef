"""XLM-R base pretraining (Conneau et al. 2020): RoBERTa-base with a 250k SentencePiece vocab.

  python -m bert_jax.tools.train_vocab --input='/data/cc100/*.txt' \\
      --output=/data/xlmr/sentencepiece.bpe.model --kind=xlmr_sentencepiece --vocab_size=250002
  python -m bert_jax.main --config=configs/xlm_roberta_base.py --workdir=/tmp/xlmr_base \\
      --config.data.corpus_paths='("/data/cc100/*.txt",)' \\
      --config.data.vocab_path=/data/xlmr/sentencepiece.bpe.model

The model is RoBERTa's (configs/roberta_base.py) under the family ``xlm_roberta`` (exports as
Hugging Face ``XLMRobertaForMaskedLM``); the vocab is a SentencePiece unigram model read with
fairseq's ids (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, pieces + 1, ``<mask>`` last).
The optimiser and schedule are RoBERTa-base's (Adam beta2 0.98, peak lr 6e-4, batch 8k, 500k
steps, no clipping); change them with --config.optimizer.* / --config.num_train_steps for
the XLM-R paper's longer multilingual schedule. 278,295,186 parameters (Hugging Face's
XLMRobertaForMaskedLM).
"""

import importlib.util
import pathlib

# roberta_base.py sits beside this file; configs/ is not a package, so load it by path.
_SPEC = importlib.util.spec_from_file_location(
  "roberta_base", pathlib.Path(__file__).with_name("roberta_base.py")
)
roberta_base = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(roberta_base)


def get_config(arg=None):
  config = roberta_base.get_config(arg)  # RoBERTa-base's architecture and optimiser.
  config.model.family = "xlm_roberta"  # The same modules; Hugging Face XLMRoberta* names.
  config.model.vocab_size = 250_002  # 250k SentencePiece pieces + <pad> and <mask>.
  return config
