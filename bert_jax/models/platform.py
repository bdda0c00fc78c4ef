"""The platform a model is being compiled for, which some kernels and layouts depend on."""

import jax


def current_platform() -> str:
  """The platform being compiled for: the context mesh's devices, else the default backend.

  Ahead-of-time compiles for a TPU topology from a CPU host set a mesh of TPU devices, so the
  mesh, not `jax.default_backend()`, says what the program will run on.

  Returns:
    "cpu", "gpu" or "tpu".
  """
  mesh = jax.sharding.get_abstract_mesh()
  return jax.default_backend() if mesh.empty else mesh.abstract_device.platform
