"""train/compiler_options: the GPU train step compiles with XLA's Triton GEMMs off; CPU and TPU
steps with XLA's defaults (the H100 compile in test_aot_compile_gpu shows the GEMMs it gives);
the CPU initialisation at LLVM level 0, to the same values."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from bert_jax.train import compiler_options, state
from tests import xla_options


def test_gpu_steps_turn_triton_gemms_off_and_others_keep_the_defaults():
  for platform in ("gpu", "cuda"):
    assert compiler_options.train_step(platform) == {"xla_gpu_enable_triton_gemm": False}
  assert compiler_options.train_step("cpu") is None
  assert compiler_options.train_step("tpu") is None
  # A copy: a caller cannot change what the next step compiles with.
  compiler_options.train_step("gpu")["xla_gpu_enable_triton_gemm"] = True
  assert compiler_options.train_step("gpu") == {"xla_gpu_enable_triton_gemm": False}


def test_cpu_initialisation_compiles_at_llvm_level_0_to_the_same_values(monkeypatch):
  assert compiler_options.init("cpu") == {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
  }
  assert compiler_options.init("tpu") is None and compiler_options.init("gpu") is None
  model = nn.Dense(16, kernel_init=nn.initializers.truncated_normal(0.02))

  def init_params(rng):
    return model.init(rng, jnp.zeros((1, 8)))["params"]

  optimizer = optax.adamw(1e-3)
  mesh = jax.sharding.Mesh(jax.devices()[:1], ("data",))
  _, shardings = state.abstract_state_and_shardings(init_params, optimizer, mesh, rules=())
  jitted_with = []
  jit = jax.jit
  monkeypatch.setattr(
    jax, "jit", lambda *args, **kwargs: jitted_with.append(kwargs) or jit(*args, **kwargs)
  )
  initialised = state.init_state(init_params, optimizer, jax.random.key(3), shardings)
  monkeypatch.undo()
  assert jitted_with[-1]["compiler_options"] == compiler_options.CPU_INIT
  # XLA's optimisations change the rounding of the initialisers' arithmetic, not the values.
  with xla_options.optimized_xla(programs=None):
    optimised = jax.jit(init_params)(jax.random.key(3))
  for name in ("kernel", "bias"):
    np.testing.assert_allclose(initialised.params[name], optimised[name], rtol=1e-6, atol=1e-7)
