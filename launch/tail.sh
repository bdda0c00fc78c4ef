#!/usr/bin/env bash
# Shows the end of the training log of one worker or of all of them (worker 0 logs the
# metrics; the others mostly repeat setup lines and their own errors).
#
#   launch/tail.sh --name=NAME --zone=ZONE --project=PROJECT
#                  [--worker=0|N|all] [--lines=100] [--follow] [--dry-run]
#
#   --worker   which worker's ~/bert_jax_run.log (default 0; all prints every worker's)
#   --lines    how many lines from the end (default 100)
#   --follow   keep printing new lines until interrupted (tail -F)
#   --dry-run  print the command, run nothing

set -euo pipefail
# shellcheck source=launch/common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"

worker=0
lines=100
follow=0
for arg in "$@"; do
  case "$arg" in
    --worker=*) worker="${arg#*=}" ;;
    --lines=*) lines="${arg#*=}" ;;
    --follow) follow=1 ;;
    *) parse_slice_flag "$arg" || unknown_flag "$arg" ;;
  esac
done
check_slice_flags
[[ $worker == all || $worker =~ ^[0-9]+$ ]] ||
  die "bad --worker='$worker': a worker number (0, 1, ...) or all"
[[ $lines =~ ^[0-9]+$ ]] || die "bad --lines='$lines': a number of lines"

remote="tail -n $lines"
if ((follow)); then remote+=" -F"; fi
remote+=" $REMOTE_LOG"
run gcloud compute tpus tpu-vm ssh "$NAME" "${SLICE_FLAGS[@]}" "--worker=$worker" \
  "--command=$remote"
