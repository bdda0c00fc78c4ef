"""bert_jax: BERT-family and Reformer-style encoders in JAX/Flax, from a laptop CPU to TPU pods."""

__version__ = "0.1.0"
