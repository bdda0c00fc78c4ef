#!/usr/bin/env bash
# Sets up every worker of a slice: Python, a virtual environment with jax[tpu] and this package
# (editable), and the checkout in ~/bert_jax (its configs/ are what run.sh passes to --config).
# Run it again after changing the code: it replaces the checkout and reinstalls.
#
#   launch/setup.sh --name=NAME --zone=ZONE --project=PROJECT
#                   [--source=DIR | --git=URL [--ref=REF]] [--python=python3.11] [--dry-run]
#
#   --source   the checkout to copy (default: the one this script is in): its tracked files and
#              untracked ones git does not ignore, as they are now, committed or not, packed into
#              $TMPDIR/bert_jax-NAME.tar.gz and copied to every worker with tpu-vm scp
#   --git      clone this URL on every worker instead (the workers need read access to it)
#   --ref      with --git: the branch, tag or commit to check out (default: the remote's HEAD)
#   --python   the interpreter to install with apt and build the venv from (>= 3.11; the TPU
#              VM images are Ubuntu 22.04, whose own python3 is 3.10)
#   --dry-run  print the commands, run nothing

set -euo pipefail
# shellcheck source=launch/common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"

# The jax release the package pins (setup.py), and the libtpu wheel index jax documents for it.
readonly JAX_TPU="jax[tpu]==0.10.2"
readonly LIBTPU_INDEX="https://storage.googleapis.com/jax-releases/libtpu_releases.html"

source_dir=""
git_url=""
ref=""
python=python3.11
for arg in "$@"; do
  case "$arg" in
    --source=*) source_dir="${arg#*=}" ;;
    --git=*) git_url="${arg#*=}" ;;
    --ref=*) ref="${arg#*=}" ;;
    --python=*) python="${arg#*=}" ;;
    *) parse_slice_flag "$arg" || unknown_flag "$arg" ;;
  esac
done
check_slice_flags
[[ $python =~ ^python3\.[0-9]+$ ]] ||
  die "bad --python='$python': name an interpreter like python3.11"
[[ -z $ref || -n $git_url ]] || die "--ref needs --git=URL (a copied checkout is used as it is)"
[[ -z $source_dir || -z $git_url ]] || die "--source and --git exclude each other; pick one"

if [[ -n $git_url ]]; then
  fetch="git clone -q $(shell_quote "$git_url") $REMOTE_CHECKOUT"
  if [[ -n $ref ]]; then fetch+=" && git -C $REMOTE_CHECKOUT checkout -q $(shell_quote "$ref")"; fi
else
  source_dir="${source_dir:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
  [[ -d $source_dir ]] || die "--source='$source_dir' is not a directory"
  git -C "$source_dir" rev-parse --is-inside-work-tree > /dev/null 2>&1 ||
    die "--source='$source_dir' is not a git checkout (its file list comes from git ls-files)"
  archive="${TMPDIR:-/tmp}/bert_jax-$NAME.tar.gz"
  pack="git -C $(shell_quote "$source_dir") ls-files -z --cached --others --exclude-standard"
  pack+=" | tar -C $(shell_quote "$source_dir") --null -T - -czf $(shell_quote "$archive")"
  run_pipeline "$pack"
  run gcloud compute tpus tpu-vm scp "$archive" "$NAME:bert_jax.tar.gz" "${SLICE_FLAGS[@]}" \
    --worker=all
  fetch="mkdir $REMOTE_CHECKOUT && tar -xzf ~/bert_jax.tar.gz -C $REMOTE_CHECKOUT"
fi

pip="$REMOTE_VENV/bin/pip"
remote="sudo apt-get update -qq"
remote+=" && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq"
remote+=" -o DPkg::Lock::Timeout=300 $python $python-venv"
remote+=" && rm -rf $REMOTE_CHECKOUT && $fetch"
remote+=" && $python -m venv $REMOTE_VENV && $pip install -q -U pip"
remote+=" && $pip install -q \"$JAX_TPU\" -f $LIBTPU_INDEX -e $REMOTE_CHECKOUT"
run gcloud compute tpus tpu-vm ssh "$NAME" "${SLICE_FLAGS[@]}" --worker=all "--command=$remote"
