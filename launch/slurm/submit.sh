#!/usr/bin/env bash
# Submits launch/slurm/train.sbatch: one training run on --nodes GPU nodes, every task started by
# one srun line and joined through jax.distributed. Run it from the checkout (the config paths
# and the workdir are read on the nodes as given).
#
#   launch/slurm/submit.sh --workdir=DIR [--config=configs/bert_base.py] [--nodes=1]
#                          [--gpus-per-node=8] [--tasks-per-node=1] [--partition=P]
#                          [--account=A] [--time=HH:MM:SS] [--job-name=bert_jax]
#                          [--python=python] [--config.KEY=VALUE ...] [--dry-run]
#
#   --workdir         the run directory, the same for every node: an absolute path on a shared
#                     filesystem, or gs://... (resumes when submitted again with the same one)
#   --config          a config file (default configs/bert_base.py)
#   --nodes           nodes (default 1)
#   --gpus-per-node   GPUs on each node (default 8)
#   --tasks-per-node  1: one process drives all the node's GPUs (default); the GPU count: one
#                     process per GPU
#   --partition, --account, --time   passed to sbatch where given
#   --python          the interpreter with bert_jax installed on the nodes (default: python)
#   --config.KEY=...  config overrides, passed on to bert_jax.main as they are
#   --dry-run         print the sbatch command, submit nothing

set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=launch/common.sh
source "$here/../common.sh"

config=configs/bert_base.py
workdir=""
nodes=1
gpus=8
tasks=1
job_name=bert_jax
python=python
sbatch_options=()
overrides=()
for arg in "$@"; do
  case "$arg" in
    --config=*) config="${arg#*=}" ;;
    --workdir=*) workdir="${arg#*=}" ;;
    --nodes=*) nodes="${arg#*=}" ;;
    --gpus-per-node=*) gpus="${arg#*=}" ;;
    --tasks-per-node=*) tasks="${arg#*=}" ;;
    --job-name=*) job_name="${arg#*=}" ;;
    --python=*) python="${arg#*=}" ;;
    --partition=* | --account=* | --time=*)
      [[ -n ${arg#*=} ]] || die "empty ${arg%%=*}= (give a value or leave the flag out)"
      sbatch_options+=("$arg")
      ;;
    --config.*=*) overrides+=("$arg") ;;
    *) parse_shared_flag "$arg" || unknown_flag "$arg" ;;
  esac
done
[[ -n $workdir ]] || die "missing --workdir=DIR (e.g. --workdir=/shared/runs/bert_base)"
[[ $workdir == /* || $workdir == gs://* ]] ||
  die "bad --workdir='$workdir': every node must see it, so give an absolute path on a shared filesystem or gs://..."
[[ $nodes =~ ^[1-9][0-9]*$ ]] || die "bad --nodes='$nodes': a number >= 1"
[[ $gpus =~ ^[1-9][0-9]*$ ]] || die "bad --gpus-per-node='$gpus': a number >= 1"
[[ $tasks == 1 || $tasks == "$gpus" ]] ||
  die "bad --tasks-per-node='$tasks': 1 (one process per node) or $gpus (one per GPU)"
[[ $job_name =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad --job-name='$job_name': letters, digits, _ . -"

run sbatch "--job-name=$job_name" "--nodes=$nodes" "--ntasks-per-node=$tasks" \
  "--gpus-per-node=$gpus" ${sbatch_options[@]+"${sbatch_options[@]}"} \
  "--export=ALL,BERT_JAX_PYTHON=$python" "${here#"$PWD"/}/train.sbatch" \
  "--config=$config" "--workdir=$workdir" ${overrides[@]+"${overrides[@]}"}
