#!/usr/bin/env bash
# Starts `python -m bert_jax.main` on every worker of a slice, detached (nohup): each worker
# appends its output to ~/bert_jax_run.log and keeps the process id in ~/bert_jax_run.pid.
# jax.distributed finds the other workers by itself. Running it again with the same --workdir
# resumes from the last checkpoint (after a preemption, stop.sh, or a crash).
#
#   launch/run.sh --name=NAME --zone=ZONE --project=PROJECT --accelerator=TYPE
#                 --config=configs/FILE.py[:ARG] --workdir=gs://BUCKET/DIR
#                 [--config.KEY=VALUE ...] [--dry-run]
#
#   --accelerator     the slice's type (as given to create.sh): a slice of more than one host
#                     needs a gs:// workdir, the one place all workers share
#   --config          a config file, relative to the checkout on the workers (~/bert_jax)
#   --workdir         the run directory: config.json, checkpoints, metrics, TensorBoard
#   --config.KEY=...  config overrides, passed on to bert_jax.main as they are
#   --dry-run         print the command, run nothing

set -euo pipefail
# shellcheck source=launch/common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"

accelerator=""
config=""
workdir=""
overrides=()
for arg in "$@"; do
  case "$arg" in
    --accelerator=*) accelerator="${arg#*=}" ;;
    --config=*) config="${arg#*=}" ;;
    --workdir=*) workdir="${arg#*=}" ;;
    --config.*=*) overrides+=("$arg") ;;
    *) parse_slice_flag "$arg" || unknown_flag "$arg" ;;
  esac
done
check_slice_flags
[[ -n $accelerator ]] || die "missing --accelerator=TYPE (the slice's type, e.g. v4-32)"
accelerator_spec "$accelerator"
[[ -n $config ]] || die "missing --config=configs/FILE.py (e.g. --config=configs/bert_base.py)"
[[ ${config%%:*} == *.py ]] ||
  die "bad --config='$config': name a config file like configs/bert_base.py[:ARG]"
[[ -n $workdir ]] || die "missing --workdir=gs://BUCKET/DIR (where checkpoints and metrics go)"
if ((MULTI_HOST)) && [[ $workdir != gs://* ]]; then
  die "--workdir='$workdir' must be a gs:// path on $accelerator ($CHIPS chips on several" \
    "hosts that must share one workdir), e.g. --workdir=gs://BUCKET/$NAME"
fi

main_command="$REMOTE_VENV/bin/python -m bert_jax.main"
for arg in "--config=$config" "--workdir=$workdir" ${overrides[@]+"${overrides[@]}"}; do
  main_command+=" $(shell_quote "$arg")"
done
# The braces keep `&` on the python process alone, so $! is the pid stop.sh signals.
remote="cd $REMOTE_CHECKOUT && { nohup $main_command >> $REMOTE_LOG 2>&1 < /dev/null &"
remote+=" echo \$! > $REMOTE_PID; }"
run gcloud compute tpus tpu-vm ssh "$NAME" "${SLICE_FLAGS[@]}" --worker=all "--command=$remote"
