"""Test setup: 8 fake CPU devices and quiet TensorFlow, fixed before jax or TF is imported."""

import os

os.environ["XLA_FLAGS"] = (
  os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # pylint: disable=g-import-not-at-top

# Implicit rank promotion hides shape bugs; make it an error everywhere under test.
jax.config.update("jax_numpy_rank_promotion", "raise")

import pytest  # noqa: E402  (after the XLA flags and jax config above)


@pytest.fixture(scope="session")
def tiny_pretrained_workdir(tmp_path_factory):
  """A pretraining workdir of a BERT-tiny-shaped model (see tests/finetune_fixtures.py),
  trained a few dozen steps once per session; fine-tuning tests pass it as ``init_from``
  together with `finetune_fixtures.model_overrides()` / `model_flags()`. Treat it as read-only.
  """
  from tests import finetune_fixtures  # pylint: disable=g-import-not-at-top

  return finetune_fixtures.pretrain_tiny(tmp_path_factory.mktemp("tiny_pretrained"))
