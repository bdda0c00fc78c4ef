#!/usr/bin/env bash
# Stops the run on every worker with SIGTERM, the signal a preemption sends: the trainer saves
# a checkpoint and exits 0. Returns once every worker's process has exited, so deleting the
# slice right after loses nothing; run.sh with the same --workdir resumes.
#
#   launch/stop.sh --name=NAME --zone=ZONE --project=PROJECT [--dry-run]
#
#   --dry-run  print the command, run nothing

set -euo pipefail
# shellcheck source=launch/common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"

for arg in "$@"; do
  parse_slice_flag "$arg" || unknown_flag "$arg"
done
check_slice_flags

# A worker whose process already exited has nothing to stop; that is not an error.
remote="pid=\$(cat $REMOTE_PID) && if kill -TERM \$pid 2> /dev/null;"
remote+=" then while kill -0 \$pid 2> /dev/null; do sleep 1; done; fi"
run gcloud compute tpus tpu-vm ssh "$NAME" "${SLICE_FLAGS[@]}" --worker=all "--command=$remote"
