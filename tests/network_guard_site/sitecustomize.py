"""Installs tests/network_guard.py in the Python processes that tests start.

tests/conftest.py puts this folder first on the children's PYTHONPATH (the test venv has no
sitecustomize of its own for this one to hide). The guard is loaded from its file, so the child
needs neither the repository on sys.path nor the ``tests`` package.
"""

import importlib.util
import os

if os.environ.get("BERT_JAX_TEST_NETWORK_LOG"):
  _path = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "network_guard.py"
  )
  _spec = importlib.util.spec_from_file_location("bert_jax_test_network_guard", _path)
  _guard = importlib.util.module_from_spec(_spec)
  _spec.loader.exec_module(_guard)
  _guard.install()
