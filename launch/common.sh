# shellcheck shell=bash disable=SC2034
# Sourced by every launch/ script: flag parsing, input checks, dry-run and command echo.
# Bad input is one line on stderr and exit status 2, like `python -m bert_jax.main`.
# (SC2034 is off: the variables set here are read by the scripts that source this file.)

# Where each TPU worker keeps the checkout, its virtual environment, the run's log and pid.
# The `~` is for the worker's shell, which sees these unquoted inside remote commands.
# shellcheck disable=SC2088
readonly REMOTE_CHECKOUT="~/bert_jax" REMOTE_VENV="~/bert_jax_venv" \
  REMOTE_LOG="~/bert_jax_run.log" REMOTE_PID="~/bert_jax_run.pid"

DRY_RUN=0
NAME=""
ZONE=""
PROJECT=""

die() {
  echo "error: $*" >&2
  exit 2
}

# The comment block under the shebang of the running script is its --help text.
print_usage() {
  sed -n '2,/^$/s/^# \{0,1\}//p' "$0"
}

# quote_word WORD: WORD as one shell word: bare when it can be, else in double quotes when
# nothing in it is special there, else in single quotes. Double quotes inside and single
# quotes outside keep a remote command in --command='...' free of escapes.
quote_word() {
  case "$1" in
    "") printf "''" ;;
    *[!A-Za-z0-9_./:=,@%+-]*)
      case "$1" in
        *[\"\$\`\\!]*) printf "'%s'" "${1//\'/\'\\\'\'}" ;;
        *) printf '"%s"' "$1" ;;
      esac
      ;;
    *) printf '%s' "$1" ;;
  esac
}

# shell_quote ARG: quote_word, keeping a --flag= prefix outside the quotes (--command='a b'),
# so printed commands stay readable and can be pasted into a shell as they are.
shell_quote() {
  if [[ $1 =~ ^(--[a-z][-a-z0-9_.]*=)(.*)$ ]]; then
    printf '%s' "${BASH_REMATCH[1]}"
    quote_word "${BASH_REMATCH[2]}"
  else
    quote_word "$1"
  fi
}

# command_line ARG...: the command as one line of shell words.
command_line() {
  local line="" arg
  for arg in "$@"; do
    line+="${line:+ }$(shell_quote "$arg")"
  done
  printf '%s\n' "$line"
}

# run CMD ARG...: prints the command (stdout with --dry-run, else "+ command" on stderr) and
# runs it unless --dry-run.
run() {
  if ((DRY_RUN)); then
    command_line "$@"
  else
    echo "+ $(command_line "$@")" >&2
    "$@"
  fi
}

# run_pipeline LINE: run, for the one step that is a shell pipeline.
run_pipeline() {
  if ((DRY_RUN)); then
    printf '%s\n' "$1"
  else
    echo "+ $1" >&2
    bash -o pipefail -c "$1"
  fi
}

# parse_shared_flag ARG: --dry-run and --help; returns 1 for any other flag.
parse_shared_flag() {
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    -h | --help)
      print_usage
      exit 0
      ;;
    *) return 1 ;;
  esac
}

# parse_slice_flag ARG: the flags naming a slice (--name, --zone, --project) and the shared
# ones; returns 1 for any other flag.
parse_slice_flag() {
  case "$1" in
    --name=*) NAME="${1#*=}" ;;
    --zone=*) ZONE="${1#*=}" ;;
    --project=*) PROJECT="${1#*=}" ;;
    *) parse_shared_flag "$1" ;;
  esac
}

unknown_flag() {
  die "unknown flag '$1' (flags are --key=value; see $(basename "$0") --help)"
}

# check_slice_flags: --name, --zone and --project are present and well formed; sets SLICE_FLAGS.
check_slice_flags() {
  [[ -n $NAME ]] || die "missing --name=TPU_NAME (the slice's name, e.g. --name=bert-base)"
  [[ -n $ZONE ]] || die "missing --zone=ZONE (e.g. --zone=us-central2-b)"
  [[ -n $PROJECT ]] || die "missing --project=PROJECT_ID (your Google Cloud project)"
  [[ $NAME =~ ^[a-z]([-a-z0-9]*[a-z0-9])?$ ]] ||
    die "bad --name='$NAME': use lowercase letters, digits and hyphens, starting with a letter"
  [[ $ZONE =~ ^[a-z]+-[a-z]+[0-9]+-[a-z0-9]+$ ]] ||
    die "bad --zone='$ZONE': a Compute Engine zone looks like us-central2-b"
  [[ $PROJECT =~ ^[-a-z0-9.:]+$ ]] ||
    die "bad --project='$PROJECT': a project ID looks like my-project-123"
  SLICE_FLAGS=("--zone=$ZONE" "--project=$PROJECT") # What every gcloud command on it takes.
}

# accelerator_spec TYPE: sets CHIPS, MULTI_HOST (0/1) and RUNTIME_VERSION for a Cloud TPU
# accelerator type, or fails listing the valid ones. Runtime versions as Cloud TPU documents
# them for JAX: https://cloud.google.com/tpu/docs/runtimes
accelerator_spec() {
  local family="${1%-*}" size="${1##*-}"
  local unknown="unknown accelerator type '$1'; use v4-N or v5p-N (N TensorCores, a multiple"
  unknown+=" of 8), v5litepod-N (v5e) or v6e-N (N chips: 1, 4, 8, 16, 32, 64, 128 or 256)"
  [[ $1 == *-* && $size =~ ^[1-9][0-9]*$ ]] || die "$unknown"
  case "$family" in
    v4 | v5p) # N counts TensorCores: two per chip, four chips per host.
      ((size % 8 == 0)) || die "$unknown"
      CHIPS=$((size / 2))
      MULTI_HOST=$((CHIPS > 4))
      ;;
    v5litepod | v6e) # N counts chips; up to eight on one host.
      [[ " 1 4 8 16 32 64 128 256 " == *" $size "* ]] || die "$unknown"
      CHIPS=$size
      MULTI_HOST=$((CHIPS > 8))
      ;;
    *) die "$unknown" ;;
  esac
  case "$family" in
    v4) RUNTIME_VERSION=tpu-ubuntu2204-base ;;
    v5p) RUNTIME_VERSION=v2-alpha-tpuv5 ;;
    v5litepod) RUNTIME_VERSION=v2-alpha-tpuv5-lite ;;
    v6e) RUNTIME_VERSION=v2-alpha-tpuv6e ;;
  esac
}
