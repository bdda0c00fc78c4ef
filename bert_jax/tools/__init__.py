"""The user commands (each a `bert-jax` subcommand, see `bert_jax.console`) and their helpers."""
