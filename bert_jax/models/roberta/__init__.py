"""RoBERTa and XLM-R: BERT's encoder with RoBERTa's positions, one segment type and no NSP.

Everything that is the family's lives here: the modules (`model`), their Hugging Face
``config.json`` and weight tables both ways (`hf`). XLM-R is the same architecture under its own
family name (``xlm_roberta``, Hugging Face ``model_type`` "xlm-roberta"), as in transformers;
only its tokenizer (a SentencePiece model with fairseq's ids) and its class names differ.
"""
