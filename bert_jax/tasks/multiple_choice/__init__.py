"""Multiple choice: SWAG-format CSV files.

reader (SWAG CSV) -> features (one [CLS] context [SEP] ending [SEP] row per choice) -> data
(the FeatureData of a run; eval accuracy) -> model ("choice_head": one score per choice) ->
objective (cross-entropy over an example's choices).
"""
