"""Process-wide settings that must be in place before TensorFlow or jax initialise."""

import os


def quiet_tensorflow():
  """Silences TensorFlow's C++ logs and oneDNN notices; call before ``import tensorflow``."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
  os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")


def import_tensorflow_for_data():
  """Imports TensorFlow for tf.data only: quiet, and hidden from any accelerator jax uses."""
  quiet_tensorflow()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  tf.config.set_visible_devices([], "GPU")
  return tf
