"""Reading a compiled program's entry computation: kernels, estimated cycles, source ops."""

from bert_jax.tools import compiled_ops

_HLO = """\
HloModule jit_train_step

%fused_computation.1 (p: bf16[8,16]) -> bf16[8,16] {
  %p = bf16[8,16]{1,0} parameter(0)
  ROOT %neg.9 = bf16[8,16]{1,0} negate(%p), backend_config={"estimated_cycles":"999"}
}

ENTRY %main.7 (a: bf16[8,16], b: bf16[16,4]) -> bf16[8,4] {
  %a = bf16[8,16]{1,0} parameter(0)
  %b = bf16[16,4]{1,0} parameter(1)
  %fusion.1 = bf16[8,16]{1,0} fusion(%a), kind=kLoop, calls=%fused_computation.1, \
metadata={op_name="jit(train_step)/jvp(Bert)/encoder/layer_3/Dropout_0/lt"}, \
backend_config={"flag_configs":[],"estimated_cycles":"100"}
  %convolution.2 = bf16[8,4]{1,0} convolution(%fusion.1, %b), dim_labels=bf_io->bf, \
metadata={op_name="jit(train_step)/jvp(Bert)/encoder/layer_11/dot_general"}, \
backend_config={"estimated_cycles":"300"}
  %fusion.3 = bf16[8,4]{1,0} fusion(%convolution.2), kind=kOutput, calls=%fused_computation.1, \
metadata={op_name="jit(train_step)/jvp(Bert)/encoder/layer_4/dot_general"}, \
backend_config={"estimated_cycles":"200"}
  %custom-call.4 = bf16[8,4]{1,0} custom-call(%fusion.3), custom_call_target="tpu_custom_call", \
backend_config={"custom_call_config":{"body":"abc","cost_estimate":{"flops":"64",\
"transcendentals":"8","bytes_accessed":"128","remote_bytes_transferred":"0"}}}
  %all-reduce.5 = bf16[8,4]{1,0} all-reduce(%custom-call.4), replica_groups={}
  ROOT %copy.6 = bf16[8,4]{1,0} copy(%all-reduce.5), backend_config={"estimated_cycles":"50"}
}
""".replace("\\\n", "")


def test_estimated_cycles_sum_the_entry_computation_only():
  # 100 + 300 + 200 + 50; the fused computation's 999 is inside fusion.1's 100.
  assert compiled_ops.estimated_cycles(_HLO) == 650
  assert compiled_ops.estimated_cycles("HloModule empty") == 0


def test_pallas_kernels_without_cycles_give_their_own_cost_estimates():
  assert compiled_ops.kernel_cost_estimates(_HLO) == (64, 128)
  with_cycles = _HLO.replace(
    '"remote_bytes_transferred":"0"}', '"remote_bytes_transferred":"0"},"estimated_cycles":"7"'
  )
  assert compiled_ops.kernel_cost_estimates(with_cycles) == (0, 0)


def test_kernels_are_the_fusions_and_custom_calls():
  assert compiled_ops.kernel_count(_HLO) == 3


def test_ops_are_grouped_by_their_source_with_layer_numbers_folded():
  rows = compiled_ops.op_groups(_HLO, clock_hz=1e6, top=5)
  assert rows == [
    {"op": "jvp(Bert)/encoder/layer_#/dot_general", "ms": 0.5, "share": 0.7692, "instructions": 2},
    {"op": "jvp(Bert)/encoder/layer_#/Dropout_#/lt", "ms": 0.1, "share": 0.1538, "instructions": 1},
    {"op": "copy", "ms": 0.05, "share": 0.0769, "instructions": 1},
  ]
  assert compiled_ops.op_groups(_HLO, clock_hz=1e6, top=1) == rows[:1]


_GPU_HLO = """\
ENTRY %main.3 (x: bf16[64,32], w: f32[32,16], bias: bf16[16]) -> bf16[64,16] {
  %x = bf16[64,32]{1,0} parameter(0)
  %w = f32[32,16]{1,0} parameter(1)
  %bias = bf16[16]{0} parameter(2)
  %wrapped_convert.1 = bf16[32,16]{1,0} fusion(%w), kind=kLoop, calls=%wrapped_convert_computation
  %cublas-lt-matmul.2 = (bf16[64,16]{1,0}, s8[4194304]{0}) custom-call(%x, %wrapped_convert.1, \
%bias), custom_call_target="__cublas$lt$matmul", backend_config={"gemm_backend_config":\
{"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],\
"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"epilogue":"BIAS"}}
  ROOT %get-tuple-element.3 = bf16[64,16]{1,0} get-tuple-element(%cublas-lt-matmul.2), index=0
}
""".replace("\\\n", "")


def test_cublas_gemms_are_counted_from_their_shapes():
  flops, bytes_accessed = compiled_ops.cublas_gemm_cost(_GPU_HLO)
  assert flops == 2 * 64 * 16 * 32  # Output elements x the contracted size, twice.
  # x, the converted weights, the bias and the product (not the workspace), in bf16.
  assert bytes_accessed == 2 * (64 * 32 + 32 * 16 + 16 + 64 * 16)
  assert compiled_ops.cublas_gemm_cost(_HLO) == (0, 0)  # A TPU program has none.
