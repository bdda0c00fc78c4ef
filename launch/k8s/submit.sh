#!/usr/bin/env bash
# Starts one training run on a GKE GPU node pool: fills in launch/k8s/jobset.yaml (a JobSet of
# one indexed Job, one pod per node on all its GPUs) and applies it with kubectl. The image must
# hold this checkout installed with its gpu and k8s extras (launch/k8s/Dockerfile), and the
# cluster the JobSet controller. Follow it with `kubectl logs -f jobs/NAME-workers-0`; stop it
# with `kubectl delete jobset NAME` (the pods get SIGTERM and save first).
#
#   launch/k8s/submit.sh --name=NAME --image=IMAGE --workdir=gs://BUCKET/DIR
#                        [--config=configs/bert_base.py] [--nodes=1] [--gpus-per-node=8]
#                        [--accelerator=nvidia-h100-80gb] [--max-restarts=3]
#                        [--config.KEY=VALUE ...] [--dry-run]
#
#   --name            the JobSet's name (lowercase letters, digits, hyphens)
#   --image           the container image, e.g. us-docker.pkg.dev/my-project/repo/bert_jax:1
#   --workdir         the run directory every pod reads and writes: gs://... (resumes when
#                     submitted again with the same one)
#   --config          a config file inside the image (default configs/bert_base.py)
#   --nodes           pods, one per node (default 1)
#   --gpus-per-node   GPUs each pod takes: all of the node's (default 8)
#   --accelerator     the node pool's cloud.google.com/gke-accelerator label
#   --max-restarts    restarts of the whole set after a failure or eviction (default 3)
#   --config.KEY=...  config overrides, passed on to bert_jax.main as they are
#   --dry-run         print the manifest it would apply, apply nothing

set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=launch/common.sh
source "$here/../common.sh"

image=""
workdir=""
config=configs/bert_base.py
nodes=1
gpus=8
accelerator=nvidia-h100-80gb
max_restarts=3
overrides=()
for arg in "$@"; do
  case "$arg" in
    --image=*) image="${arg#*=}" ;;
    --workdir=*) workdir="${arg#*=}" ;;
    --config=*) config="${arg#*=}" ;;
    --nodes=*) nodes="${arg#*=}" ;;
    --gpus-per-node=*) gpus="${arg#*=}" ;;
    --accelerator=*) accelerator="${arg#*=}" ;;
    --max-restarts=*) max_restarts="${arg#*=}" ;;
    --config.*=*) overrides+=("$arg") ;;
    --name=*) NAME="${arg#*=}" ;;
    *) parse_shared_flag "$arg" || unknown_flag "$arg" ;;
  esac
done
[[ -n $NAME ]] || die "missing --name=NAME (the JobSet's name, e.g. --name=bert-base)"
[[ $NAME =~ ^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$ ]] ||
  die "bad --name='$NAME': up to 32 lowercase letters, digits and hyphens, starting with a letter"
[[ -n $image ]] || die "missing --image=IMAGE (built from launch/k8s/Dockerfile and pushed)"
[[ $image =~ ^[^[:space:]\"\'\\]+$ ]] || die "bad --image='$image': an image reference has no spaces or quotes"
[[ $workdir == gs://?* ]] ||
  die "bad --workdir='$workdir': every pod must see it, so give a gs://BUCKET/DIR"
[[ $nodes =~ ^[1-9][0-9]*$ ]] || die "bad --nodes='$nodes': a number >= 1"
[[ $gpus =~ ^[1-9][0-9]*$ ]] || die "bad --gpus-per-node='$gpus': a number >= 1"
[[ $max_restarts =~ ^[0-9]+$ ]] || die "bad --max-restarts='$max_restarts': a number >= 0"
[[ $accelerator =~ ^[a-z0-9-]+$ ]] ||
  die "bad --accelerator='$accelerator': a GKE accelerator name, e.g. nvidia-h100-80gb"

# json_string WORD: WORD as a double-quoted string, which YAML reads as JSON does.
json_string() {
  local word="${1//\\/\\\\}"
  printf '"%s"' "${word//\"/\\\"}"
}

args=""
for arg in "--config=$config" "--workdir=$workdir" ${overrides[@]+"${overrides[@]}"}; do
  args+="${args:+, }$(json_string "$arg")"
done
# fill FIELD VALUE: the template's ${FIELD} becomes VALUE (quoted: no pattern or & in it).
fill() {
  local field="\${$1}"
  manifest="${manifest//"$field"/"$2"}"
}
manifest="$(<"$here/jobset.yaml")"
fill NAME "$NAME"
fill IMAGE "$image"
fill NODES "$nodes"
fill GPUS_PER_NODE "$gpus"
fill ACCELERATOR "$accelerator"
fill MAX_RESTARTS "$max_restarts"
fill ARGS "$args"

if ((DRY_RUN)); then
  printf '%s\n' "$manifest"
else
  echo "+ kubectl apply -f - (the manifest --dry-run prints)" >&2
  printf '%s\n' "$manifest" | kubectl apply -f -
fi
