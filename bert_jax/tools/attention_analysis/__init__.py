"""The parts of tools/analyze_attention: which attention heads track syntax, and how well.

`conllu` reads the treebank, `word_maps` turns token attention into word attention,
`relations` scores heads on dependency relations against the fixed-offset baseline,
`head_stats` measures every head's general behaviour, `attention_maps` runs the model,
`report` and `plots` write the tables, summary and pictures.
"""
