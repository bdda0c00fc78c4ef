"""BERT (Devlin et al. 2019): the post-LN encoder built from the shared blocks.

The package owns the family: its modules, its Hugging Face interop, and ``family.FAMILY``,
the `family_spec.Family` record that `models/families.py` registers. (``FAMILY`` lives in
``family.py``, not here, so that importing one module of the package, e.g. a config section
that `models/config.py` needs, does not import the whole family.)
"""
