"""Command-line plumbing shared by `bert_jax.main`, the tools and the benchmarks."""
