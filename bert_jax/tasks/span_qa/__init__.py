"""Span question answering: SQuAD v1.1 / v2.0 JSON files or TFDS squad.

reader (SQuAD JSON, TFDS) -> features (question + context windows, answer token spans) ->
data (the FeatureData of a run) -> model ("qa_outputs": start and end logits) -> objective
(start and end cross-entropy) -> postprocess (logits -> answer texts) -> metrics (official
EM / F1).
"""
