"""train/compiler_options: the GPU train step compiles with XLA's Triton GEMMs off; CPU and TPU
steps with XLA's defaults (the H100 compile in test_aot_compile_gpu shows the GEMMs it gives)."""

from bert_jax.train import compiler_options


def test_gpu_steps_turn_triton_gemms_off_and_others_keep_the_defaults():
  for platform in ("gpu", "cuda"):
    assert compiler_options.train_step(platform) == {"xla_gpu_enable_triton_gemm": False}
  assert compiler_options.train_step("cpu") is None
  assert compiler_options.train_step("tpu") is None
  # A copy: a caller cannot change what the next step compiles with.
  compiler_options.train_step("gpu")["xla_gpu_enable_triton_gemm"] = True
  assert compiler_options.train_step("gpu") == {"xla_gpu_enable_triton_gemm": False}
