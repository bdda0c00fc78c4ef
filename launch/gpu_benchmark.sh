#!/usr/bin/env bash
# Times bert_jax's pretraining step against Hugging Face's PyTorch BertForPreTraining on this
# machine's GPU, in one go: BERT-base (batch 256 x 128) eager and with torch.compile, then
# BERT-large (batch 128 x 128) eager; bf16, dropout 0.1, AdamW, seq 128 (the H200 table of docs/benchmarks.md).
# The runs attention and attention512 (not run unless named) time BERT-base with the dense
# attention kernel against the flash one side by side (bench/benchmark_variants), at 256 x 128
# and at 64 x 512, attention dropout 0.1 in both; gemms times BERT-base as the GPU step compiles
# (cuBLAS for every matrix product, train/compiler_options.py) against XLA's Triton GEMMs;
# large_unrolled times BERT-large as configured (scanned layers, for compile time on pods)
# against unrolled ones, which one GPU has the memory for; fusions times BERT-base as compiled
# against three other ways of running its layer norms and other reductions (cuDNN's layer-norm
# kernels; XLA's Triton block-level fusions; bert_jax's own Triton layer-norm kernels,
# model.layer_norm_kind=triton), for the 5 ms that layer norm took of the H200 step's profile; a
# variant XLA refuses is left out with a line in the log. Every line has each step
# waited for (median_step_s) and steps kept in flight as the trainer runs them
# (in_flight_step_s).
# Each run appends its JSON line to OUT_DIR/gpu_benchmark.jsonl as soon as it finishes (a run
# cut short keeps the lines before it) and writes its stderr to OUT_DIR/<run>.log. The checkout
# is used in place (PYTHONPATH), nothing is installed but the wheels of --wheels.
#
#   launch/gpu_benchmark.sh [--out=DIR] [--python=python3] [--steps=20] [--rounds=4]
#                           [--runs=base,base_compile,large,attention,attention512,gemms,
#                                   large_unrolled,fusions]
#                           [--wheels=DIR] [--profile]
#                           [--gpu_tests] [--config.KEY=VALUE ...] [--dry-run]
#
#   --out      where the lines and logs go (default: $OUT if set, else .)
#   --python   the interpreter with jax (CUDA), flax, optax, orbax, torch, transformers
#   --steps    timed steps of each implementation (after two warm-up steps)
#   --rounds   alternating rounds the steps are split into
#   --runs     which of base, base_compile, large, attention, attention512, gemms,
#              large_unrolled, fusions to run, in this order
#   --wheels   a folder of wheels to install first into a temporary folder (--no-index), for
#              packages the host lacks; ml_collections is the one bert_jax needs that GPU
#              images often lack: `pip download --no-deps ml-collections==1.1.0 -d DIR`
#   --profile  also trace 3 of bert_jax's steps per run (in OUT_DIR/trace_<run>) and write where
#              their device time goes, per GPU kernel, to OUT_DIR/<run>.profile.jsonl
#              (bench/profile_table; the folders a trace makes are too deep for some copy tools)
#   --gpu_tests first run the tests that need a GPU (tests/test_cudnn_attention.py,
#              tests/test_flash_attention.py and tests/test_layer_norm_kernels.py: the cudnn
#              and flash attention kinds against the dense one and the Triton layer norm against
#              float64, compiled for the GPU), their summary in OUT_DIR/gpu_tests.txt, then
#              time one layer's attention kernels (bench/benchmark_gpu_attention), the packed
#              flash kernels under other Triton launches too, into OUT_DIR/gpu_attention.jsonl,
#              and one norm's forward + backward, XLA's against the Triton kernels under five
#              launches (bench/benchmark_gpu_layer_norm), into OUT_DIR/gpu_layer_norm.jsonl
#   --config.KEY=...  config overrides for every run, after the table's own (e.g. a small
#              model to try the script on a CPU)
#   --dry-run  print the commands, run nothing

set -euo pipefail
# shellcheck source=launch/common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-.}"
python=python3
steps=20
rounds=4
runs=base,base_compile,large
wheels=""
profile=0
gpu_tests=0
overrides=()
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    --python=*) python="${arg#*=}" ;;
    --steps=*) steps="${arg#*=}" ;;
    --rounds=*) rounds="${arg#*=}" ;;
    --runs=*) runs="${arg#*=}" ;;
    --wheels=*) wheels="${arg#*=}" ;;
    --profile) profile=1 ;;
    --gpu_tests) gpu_tests=1 ;;
    --config.*=*) overrides+=("$arg") ;;
    *) parse_shared_flag "$arg" || unknown_flag "$arg" ;;
  esac
done
[[ $steps =~ ^[1-9][0-9]*$ ]] || die "bad --steps='$steps': a number >= 1"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "bad --rounds='$rounds': a number >= 1"
IFS=, read -r -a selected <<< "$runs"
for run_name in "${selected[@]}"; do
  [[ " base base_compile large attention attention512 gemms large_unrolled fusions " == \
    *" $run_name "* ]] ||
    die "bad --runs='$runs': a comma-separated list of base, base_compile, large, attention," \
      "attention512, gemms, large_unrolled, fusions"
done
[[ -z $wheels || -d $wheels ]] || die "bad --wheels='$wheels': not a folder"

# run_args NAME: sets TOOL and ARGS to the benchmark module and flags of that run.
run_args() {
  local base=(--config.model.dtype=bfloat16 "--steps=$steps" "--rounds=$rounds"
    --baseline=hf_torch)
  local timing=(--config.model.dtype=bfloat16 "--steps=$steps" "--rounds=$rounds")
  local kinds=("${timing[@]}" --variant=dense:model.attention_kind=dense
    --variant=flash:model.attention_kind=flash)
  TOOL=bert_jax.bench.benchmark
  case "$1" in
    base) ARGS=(--config=configs/bert_base.py --config.global_batch_size=256 "${base[@]}") ;;
    base_compile)
      ARGS=(--config=configs/bert_base.py --config.global_batch_size=256 "${base[@]}"
        --torch_compile)
      ;;
    large) ARGS=(--config=configs/bert_large.py --config.global_batch_size=128 "${base[@]}") ;;
    attention)
      TOOL=bert_jax.bench.benchmark_variants
      ARGS=(--config=configs/bert_base.py --config.global_batch_size=256 "${kinds[@]}")
      ;;
    attention512)
      TOOL=bert_jax.bench.benchmark_variants
      ARGS=(--config=configs/bert_base.py --config.global_batch_size=64
        --config.data.max_seq_length=512 --config.data.max_predictions_per_seq=80 "${kinds[@]}")
      ;;
    gemms)
      TOOL=bert_jax.bench.benchmark_variants
      ARGS=(--config=configs/bert_base.py --config.global_batch_size=256 "${timing[@]}"
        --variant=default "--variant=triton_gemm:xla.xla_gpu_enable_triton_gemm=true")
      ;;
    large_unrolled)
      TOOL=bert_jax.bench.benchmark_variants
      ARGS=(--config=configs/bert_large.py --config.global_batch_size=128 "${timing[@]}"
        --variant=configured "--variant=unrolled:model.scan_layers=false")
      ;;
    fusions)
      TOOL=bert_jax.bench.benchmark_variants
      ARGS=(--config=configs/bert_base.py --config.global_batch_size=256 "${timing[@]}"
        --variant=default --variant=cudnn_norm:xla.xla_gpu_enable_cudnn_layer_norm=true
        --variant=block_level:xla.xla_gpu_experimental_enable_fusion_block_level_rewriter=true
        --variant=triton_norm:model.layer_norm_kind=triton)
      ;;
  esac
}

# kernel_timing FILE COMMAND...: runs a kernel-timing tool, its lines to FILE and its stderr to
# the GPU tests' summary.
kernel_timing() {
  local file="$1"
  shift
  if ((DRY_RUN)); then
    echo "$(command_line "$@") > $(quote_word "$file")"
    return
  fi
  echo "+ $(command_line "$@")" >&2
  "$@" > "$file" 2>> "$out/gpu_tests.txt" || failed=1
}

site=""
if [[ -n $wheels ]]; then
  site="$(mktemp -d)"
  run "$python" -m pip install -q --no-index --no-deps --no-compile --target "$site" \
    "$wheels"/*.whl
fi
export PYTHONPATH="${site:+$site:}$repo${PYTHONPATH:+:$PYTHONPATH}"
# One persistent compilation cache: base_compile reuses base's compiled bert_jax step.
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-$(mktemp -d)}"
export PYTHONUNBUFFERED=1
if ((!DRY_RUN)); then
  "$python" -c "import ml_collections" 2> /dev/null ||
    die "ml_collections is missing for $python; pass --wheels=DIR holding its wheel (see --help)"
  mkdir -p "$out"
  out="$(cd "$out" && pwd)" # The runs start in the checkout.
fi
cd "$repo"
failed=0
if ((gpu_tests)); then
  # conftest.py defaults JAX to the CPU; these tests skip there.
  tests=(env "JAX_PLATFORMS=cuda,cpu" "$python" -m pytest -q -p no:cacheprovider --tb=short -rs
    tests/test_cudnn_attention.py tests/test_flash_attention.py tests/test_layer_norm_kernels.py)
  if ((DRY_RUN)); then
    echo "$(command_line "${tests[@]}") > $(quote_word "$out/gpu_tests.txt")"
  else
    echo "+ $(command_line "${tests[@]}")" >&2
    "${tests[@]}" > "$out/gpu_tests.txt" 2>&1 || { tail -n 5 "$out/gpu_tests.txt" >&2; failed=1; }
  fi
  # One layer's attention kernels timed side by side. Command buffers off: cuDNN's dropout
  # aborts the process inside them (JAX 0.11.2).
  # The flash launches: other warps, stages and blocks than flash.default_launch's
  # (128/8/64/4/2 at BERT-base's head_dim 64) for the forward and the backward kernels.
  kernels=(env "XLA_FLAGS=--xla_gpu_enable_command_buffer=" "$python" -m
    bert_jax.bench.benchmark_gpu_attention --flash_launch=128/4/64/4/2
    --flash_launch=128/8/64/8/2 --flash_launch=128/8/64/4/3 --flash_launch=64/4/64/4/2
    --flash_launch=128/8/32/4/2)
  # The layer-norm launches: one row a forward program (Triton's tutorial), and larger or
  # smaller blocks, warps and backward programs than layer_norm_kernels.Launch's 4/4/4/64/4.
  norms=("$python" -m bert_jax.bench.benchmark_gpu_layer_norm --norm_launch=1/4/4/64/4
    --norm_launch=8/8/8/64/8 --norm_launch=2/4/2/32/4 --norm_launch=4/8/4/128/8 --norm_launch=4/4/8/256/8)
  kernel_timing "$out/gpu_attention.jsonl" "${kernels[@]}"
  kernel_timing "$out/gpu_layer_norm.jsonl" "${norms[@]}"
fi
for run_name in "${selected[@]}"; do
  run_args "$run_name"
  command=("$python" -m "$TOOL" "${ARGS[@]}" ${overrides[@]+"${overrides[@]}"})
  table=()
  if ((profile)); then
    command+=("--profile_dir=$out/trace_$run_name" --profile_steps=3)
    # benchmark_variants prints each variant's top kernels in its own lines.
    [[ $TOOL == bert_jax.bench.benchmark_variants ]] ||
      table=("$python" -m bert_jax.bench.profile_table "--trace_dir=$out/trace_$run_name"
        --steps=3 --top=40)
  fi
  if ((DRY_RUN)); then
    echo "$(command_line "${command[@]}") >> $(quote_word "$out/gpu_benchmark.jsonl")"
    ((!${#table[@]})) ||
      echo "$(command_line "${table[@]}") > $(quote_word "$out/$run_name.profile.jsonl")"
    continue
  fi
  echo "+ $(command_line "${command[@]}")" >&2
  status=0
  "${command[@]}" 2> "$out/$run_name.log" | tee -a "$out/gpu_benchmark.jsonl" || status=$?
  if ((status)); then # The other runs still go ahead.
    tail -n 5 "$out/$run_name.log" >&2
    echo "error: the $run_name run exited with status $status (log: $out/$run_name.log)" >&2
    failed=1
  elif ((${#table[@]})); then
    "${table[@]}" > "$out/$run_name.profile.jsonl" 2>> "$out/$run_name.log" || failed=1
  fi
done
exit "$failed"
