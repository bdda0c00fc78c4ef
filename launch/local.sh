#!/usr/bin/env bash
# Runs one training job as N processes on this machine, each with its own fake CPU devices,
# joined through jax.distributed (gloo collectives) the way the workers of a pod slice are:
# pod bugs (per-host data shards, multi-process checkpoints) show up before a pod is paid for.
# Every process prints to this terminal. If one fails, the others are stopped.
#
#   launch/local.sh --workdir=DIR [--config=configs/bert_tiny.py] [--num-processes=2]
#                   [--devices-per-process=2] [--port=12355] [--python=python]
#                   [--config.KEY=VALUE ...] [--dry-run]
#
#   --workdir              the run directory (resumes when run again with the same one)
#   --config               a config file (default configs/bert_tiny.py)
#   --num-processes        processes to start (default 2)
#   --devices-per-process  fake CPU devices in each (default 2)
#   --port                 the coordinator's port on 127.0.0.1 (process 0 listens there)
#   --python               the interpreter with bert_jax installed (default: python)
#   --config.KEY=...       config overrides, passed on to bert_jax.main as they are
#   --dry-run              print the commands, run nothing

set -euo pipefail
# shellcheck source=launch/common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"

config=configs/bert_tiny.py
workdir=""
num_processes=2
devices=2
port=12355
python=python
overrides=()
for arg in "$@"; do
  case "$arg" in
    --config=*) config="${arg#*=}" ;;
    --workdir=*) workdir="${arg#*=}" ;;
    --num-processes=*) num_processes="${arg#*=}" ;;
    --devices-per-process=*) devices="${arg#*=}" ;;
    --port=*) port="${arg#*=}" ;;
    --python=*) python="${arg#*=}" ;;
    --config.*=*) overrides+=("$arg") ;;
    *) parse_shared_flag "$arg" || unknown_flag "$arg" ;;
  esac
done
[[ -n $workdir ]] || die "missing --workdir=DIR (e.g. --workdir=/tmp/bert_tiny_local)"
[[ $num_processes =~ ^[1-9][0-9]*$ ]] || die "bad --num-processes='$num_processes': a number >= 1"
[[ $devices =~ ^[1-9][0-9]*$ ]] || die "bad --devices-per-process='$devices': a number >= 1"
if ! [[ $port =~ ^[1-9][0-9]{0,4}$ ]] || ((port > 65535)); then
  die "bad --port='$port': a TCP port number"
fi

# stop_processes PID...: ends these processes (started here and not yet waited for).
stop_processes() {
  local pid
  for pid in "$@"; do
    kill "$pid" 2> /dev/null || true
  done
}

pids=()
for ((i = 0; i < num_processes; i++)); do
  command=(env "XLA_FLAGS=--xla_force_host_platform_device_count=$devices" JAX_PLATFORMS=cpu
    "$python" -m bert_jax.main "--config=$config" "--workdir=$workdir"
    "--coordinator_address=127.0.0.1:$port" "--num_processes=$num_processes" "--process_id=$i"
    ${overrides[@]+"${overrides[@]}"})
  if ((DRY_RUN)); then
    echo "$(command_line "${command[@]}") &"
  else
    echo "+ $(command_line "${command[@]}") &" >&2
    "${command[@]}" &
    pids+=("$!")
  fi
done
if ((DRY_RUN)); then
  echo wait
  exit 0
fi

remaining=("${pids[@]}")
trap 'stop_processes "${remaining[@]}"; exit 130' INT TERM
# Wait for every process, polling so that the first failure stops the rest at once (a process
# left alone would wait for its lost peers until jax.distributed times out).
while ((${#remaining[@]})); do
  running=()
  for ((k = 0; k < ${#remaining[@]}; k++)); do
    pid="${remaining[k]}"
    if kill -0 "$pid" 2> /dev/null; then
      running+=("$pid")
      continue
    fi
    status=0
    wait "$pid" || status=$?
    if ((status)); then
      echo "error: process $pid exited with status $status; stopping the others" >&2
      stop_processes ${running[@]+"${running[@]}"} "${remaining[@]:k+1}"
      exit "$status"
    fi
  done
  remaining=(${running[@]+"${running[@]}"})
  if ((${#remaining[@]})); then sleep 0.2; fi
done
