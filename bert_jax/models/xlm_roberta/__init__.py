"""XLM-R (Conneau et al. 2020): RoBERTa's architecture (`bert_jax.models.roberta`) under its own
family name, as in transformers; only its tokenizer (a SentencePiece model with fairseq's ids),
its Hugging Face ``model_type`` ("xlm-roberta") and class names differ.
"""
