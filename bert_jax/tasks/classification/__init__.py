"""Sentence (pair) classification and regression: GLUE tasks, or custom CSV/TSV files.

reader (GLUE TSV, custom CSV/TSV, TFDS glue/<task>) -> features ([CLS] A [SEP] B [SEP]) ->
data (the FeatureData of a run) -> model ("classifier" head on the pooled output) ->
objective (cross-entropy or squared error) -> metrics (GLUE's official ones).
"""
