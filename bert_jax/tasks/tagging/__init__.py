"""Token classification (NER, POS, chunking): CoNLL files or TFDS conll2003.

reader (CoNLL columns, TFDS) -> features (first sub-word of each word, windows over long
sentences) -> data (the FeatureData of a run; predictions back to words) -> model ("tagger"
head on every token) -> objective (per-token cross-entropy) -> metrics (seqeval's entity F1).
"""
