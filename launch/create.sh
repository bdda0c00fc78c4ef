#!/usr/bin/env bash
# Creates a Cloud TPU VM slice, on demand, as Spot VMs or from a reservation; directly
# (tpu-vm create: fails at once when there is no capacity) or as a queued resource (waits in
# the queue; the node gets the same name, so the other scripts work on it unchanged).
#
#   launch/create.sh --name=NAME --zone=ZONE --project=PROJECT --accelerator=TYPE
#                    [--spot | --reserved] [--queued] [--version=RUNTIME] [--dry-run]
#
#   --accelerator  v4-N, v5p-N (N TensorCores), v5litepod-N or v6e-N (N chips)
#   --spot         Spot VMs: cheaper, may be preempted (training resumes from checkpoints)
#   --reserved     use the project's reserved capacity
#   --queued       gcloud compute tpus queued-resources create; watch it with
#                  gcloud compute tpus queued-resources describe NAME --zone=ZONE
#   --version      TPU software version; default: the one Cloud TPU documents for the type
#   --dry-run      print the command, run nothing

set -euo pipefail
# shellcheck source=launch/common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"

accelerator=""
version=""
provisioning=""
queued=0
for arg in "$@"; do
  case "$arg" in
    --accelerator=*) accelerator="${arg#*=}" ;;
    --version=*) version="${arg#*=}" ;;
    --spot | --reserved)
      [[ -z $provisioning || $provisioning == "$arg" ]] ||
        die "--spot and --reserved exclude each other; pick one"
      provisioning="$arg"
      ;;
    --queued) queued=1 ;;
    *) parse_slice_flag "$arg" || unknown_flag "$arg" ;;
  esac
done
check_slice_flags
[[ -n $accelerator ]] || die "missing --accelerator=TYPE (e.g. v4-32 or v5litepod-16)"
accelerator_spec "$accelerator"
version="${version:-$RUNTIME_VERSION}"

if ((queued)); then
  command=(gcloud compute tpus queued-resources create "$NAME" "--node-id=$NAME" "${SLICE_FLAGS[@]}"
    "--accelerator-type=$accelerator" "--runtime-version=$version")
else
  command=(gcloud compute tpus tpu-vm create "$NAME" "${SLICE_FLAGS[@]}"
    "--accelerator-type=$accelerator" "--version=$version")
fi
if [[ -n $provisioning ]]; then command+=("$provisioning"); fi
run "${command[@]}"
