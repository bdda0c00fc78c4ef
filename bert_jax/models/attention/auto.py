"""What ``attention_kind='auto'`` runs on each platform.

On GPU the Triton flash kernels (attention dropout inside them) run wherever they tile the
length: on an H200 (JAX 0.11.2), one BERT-base layer's attention forward + backward with dropout
0.1 took 0.78 ms with them against 1.29 ms dense at batch 256 × seq 128, and 1.95 against 2.87 ms
at 64 × 512; the whole BERT-base train step at 256 × 128 took 52.8 against 60.0 ms
(`bench/benchmark_variants`, 2026-11-28).

On TPU the Pallas kernels win where the [B, H, L, L] probabilities are large: splash when there
is no attention dropout (it has none), flash with BERT's attention dropout from length 512 on.
libtpu's cost model (`tools/aot_compile`'s compiler estimate, BERT-base on v5p-8, batch 256,
dropout 0.1) puts the seq-512 step at 91 ms with flash against 131 ms with dense attention;
at seq 128 the two are within 2% (23.7 against 24.0 ms), and dense stays. Everywhere else
(CPU, lengths the kernels do not tile, head sizes flash does not take) the dense kernel runs.
"""

from bert_jax.models.attention import blocks

# From this length on, flash attention with dropout beats dense attention on TPU.
TPU_FLASH_MIN_LENGTH = 512


def auto_kind(platform: str, length: int, attention_dropout_rate: float, head_dim: int) -> str:
  """The kernel ``attention_kind='auto'`` stands for.

  Args:
    platform: "tpu", "gpu" or "cpu" (the backend the model runs on).
    length: the sequence length.
    attention_dropout_rate: dropout on the attention probabilities.
    head_dim: the per-head width (flash takes powers of two from 16 to 256).

  Returns:
    "splash", "flash" or "dense"; all three have the same parameters.
  """
  flash_head = head_dim in blocks.FLASH_HEAD_DIMS
  if platform == "gpu":
    return "flash" if flash_head and length % blocks.TRITON_MIN_BLOCK == 0 else "dense"
  if platform != "tpu" or length % blocks.TPU_LANES:
    return "dense"
  if attention_dropout_rate == 0:
    return "splash"
  if length >= TPU_FLASH_MIN_LENGTH and flash_head:
    return "flash"
  return "dense"
