#!/usr/bin/env bash
# Deletes a slice (billing stops). The workdir on gs:// stays. Stop the run first (stop.sh) so
# it saves a last checkpoint.
#
#   launch/delete.sh --name=NAME --zone=ZONE --project=PROJECT [--queued] [--dry-run]
#
#   --queued   the slice came from create.sh --queued: delete the queued resource, and with
#              --force its node too
#   --dry-run  print the command, run nothing

set -euo pipefail
# shellcheck source=launch/common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"

queued=0
for arg in "$@"; do
  case "$arg" in
    --queued) queued=1 ;;
    *) parse_slice_flag "$arg" || unknown_flag "$arg" ;;
  esac
done
check_slice_flags

if ((queued)); then
  run gcloud compute tpus queued-resources delete "$NAME" "${SLICE_FLAGS[@]}" --force --quiet
else
  run gcloud compute tpus tpu-vm delete "$NAME" "${SLICE_FLAGS[@]}" --quiet
fi
