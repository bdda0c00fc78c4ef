"""Process-wide settings that must be in place before TensorFlow or jax initialise."""

import importlib.util
import os


def quiet_tensorflow():
  """Silences TensorFlow's C++ logs and oneDNN notices; call before ``import tensorflow``."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
  os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")


def tensorflow_without_keras():
  """Keeps TensorFlow from importing Keras when it is imported; for a program that owns its
  process and never uses ``tf.keras`` (``bert-jax train``). Call before ``import tensorflow``.

  TensorFlow 2.16+ imports Keras 3 at its own import (to register Keras's optimizers for
  SavedModel), and Keras imports matplotlib and scikit-learn: about 2 s of every run's start,
  on every host of a pod, for a program that uses TensorFlow only for tf.data and summaries.
  Pointed at the legacy Keras package (tf_keras) where that is not installed, TensorFlow
  skips the import; ``tf.keras`` would then fail on use, which is why a library import of
  bert_jax does not do this. Nothing changes where tf_keras is installed or the variable set.
  """
  if importlib.util.find_spec("tf_keras") is None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


def import_tensorflow_for_data():
  """Imports TensorFlow for tf.data only: quiet, and hidden from any accelerator jax uses."""
  quiet_tensorflow()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  tf.config.set_visible_devices([], "GPU")
  return tf


def limit_jax_to_present_platforms() -> str | None:
  """Restricts jax to the platforms this host has, unless ``JAX_PLATFORMS`` says otherwise.

  With the ``tpu`` or ``cuda`` extra installed, jax initialises every plugin it finds: on a
  host without the device, libtpu prints start-up errors (and advice to delete its lockfile
  when two runs start at once) and the CUDA plugin a traceback. Looking for the devices first,
  the way jax itself decides whether to warn about a missing backend, keeps such a host quiet
  and leaves TPU VMs and GPU hosts as they are. Call before jax initialises its backends.

  Returns:
    The platforms set (e.g. "cpu", "cuda,cpu"), or None where nothing was changed: the
    variable was set, or the host has TPU chips.
  """
  if "JAX_PLATFORMS" in os.environ:
    return None
  import jax  # pylint: disable=g-import-not-at-top
  from jax._src import hardware_utils  # pylint: disable=g-import-not-at-top

  if hardware_utils.num_available_tpu_chips_and_device_id()[0] > 0:
    return None
  platforms = "cuda,cpu" if hardware_utils.has_visible_nvidia_gpu() else "cpu"
  # The variable reaches child processes; the config reaches a jax already imported.
  os.environ["JAX_PLATFORMS"] = platforms
  jax.config.update("jax_platforms", platforms)
  return platforms
