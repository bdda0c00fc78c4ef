"""Transformer-XL (Dai et al. 2019): a causal LM with segment-level memory.

The package owns the family: its modules, its Hugging Face interop, and ``family.FAMILY``,
the `family_spec.Family` record that `models/families.py` registers. (``FAMILY`` lives in
``family.py``, not here, so that importing one module of the package, e.g. a config section
that `models/config.py` needs, does not import the whole family.)
"""
