"""Running `bert_jax.main` as a process of its own, the way users and TPU workers run it (forked
from a server that has made its imports already: tests/program_server.py)."""

import json
import os
import pathlib
import socket
import sys
from typing import NamedTuple

import jax
import numpy as np
import orbax.checkpoint as ocp

from bert_jax.data import default_corpus
from tests import allocator, program_server, xla_options

REPO = pathlib.Path(__file__).resolve().parents[1]


def small_flags(**overrides):
  """Command-line overrides making configs/bert_tiny.py a few-second CPU run."""
  values = {
    "num_train_steps": 8,
    "global_batch_size": 8,
    "log_every_steps": 1,
    "eval_every_steps": 1000,
    "checkpoint_every_steps": 4,
    "model.max_position_embeddings": 64,
    "data.max_seq_length": 32,
    "data.max_predictions_per_seq": 5,
    "data.num_eval_examples": 16,
    "optimizer.warmup_steps": 2,
  }
  values.update(overrides)
  return [f"--config.{k}={v}" for k, v in values.items()]


# A program measures its CPU's matmul peak (MFU's denominator) from six 2048^2 matmuls: 1.4 CPU-s
# of a tiny run's 10-14. The programs the tests start state a peak instead, as the in-process
# learning runs do; other in-process runs measure it, once per test worker.
_PEAK_FLOPS = "--config.peak_flops_per_device=1e12"


def main_command(workdir, extra_flags=(), config="configs/bert_tiny.py"):
  return [
    sys.executable,
    "-m",
    "bert_jax.main",
    f"--config={REPO / config}",
    f"--workdir={workdir}",
    _PEAK_FLOPS,
    *extra_flags,
  ]


# The children run a few steps of tiny models, where XLA:CPU's LLVM optimisation costs far more
# than it saves: at level 0 their programs compile 2-3x faster (the same metrics to 4 digits
# in a 200-step ELECTRA run; pure compute runs ~2x slower, so not for the long learning tests).
# The options of the unoptimised compiles in process (tests/xla_options.py: the older loop
# emitters, one LLVM module) take a small bert_tiny run 14-16 s -> 12.6-13.4 s, with the same
# metrics.
CHILD_XLA_FLAGS = "--xla_backend_optimization_level=0 " + xla_options.as_xla_flags(
  xla_options.UNOPTIMIZED_CPU_OPTIONS
)


# What a cluster's launcher puts in each task's environment; the children get only what a test
# gives them, so a suite itself run under srun or mpirun still starts plain processes.
_CLUSTER_PREFIXES = ("SLURM_", "OMPI_", "PMI_", "PMIX_", "JAX_COORDINATOR", "JAX_LOCAL_DEVICE")
_CLUSTER_NAMES = ("JOB_COMPLETION_INDEX", "KUBERNETES_SERVICE_HOST", "TPU_WORKER_HOSTNAMES")


def env(devices=1, **extra):
  environment = {
    k: v
    for k, v in os.environ.items()
    if not k.startswith(_CLUSTER_PREFIXES) and k not in _CLUSTER_NAMES
  }
  environment.update(
    XLA_FLAGS=f"--xla_force_host_platform_device_count={devices} {CHILD_XLA_FLAGS}",
    JAX_PLATFORMS="cpu",
    TF_CPP_MIN_LOG_LEVEL="2",
    **allocator.ENVIRONMENT,
    **extra,
  )
  return environment


def run_main(
  workdir, extra_flags=(), devices=1, timeout=300, config="configs/bert_tiny.py", **environ
):
  """Runs the program to its end: a `subprocess.CompletedProcess` with its output as text."""
  return program_server.run(
    main_command(workdir, extra_flags, config), env(devices, **environ), REPO, timeout
  )


def start_main(
  workdir,
  extra_flags=(),
  devices=1,
  stderr_path=None,
  config="configs/bert_tiny.py",
  **environ,
):
  """Starts the program: a `program_server.Program` (poll, wait, kill, send_signal, output)
  whose stderr goes to ``stderr_path`` (a temporary file when None)."""
  return program_server.Program(
    main_command(workdir, extra_flags, config),
    env(devices, **environ),
    REPO,
    stderr_path=stderr_path,
  )


def free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def launcher_env(launcher, process_id, num_processes, port):
  """The variables ``launcher`` gives task ``process_id`` of a one-host job, or coordinator
  flags for "flags"; the coordinator listens on ``port`` of 127.0.0.1 either way.

  Returns:
    (extra command-line flags, extra environment variables).
  """
  task = str(process_id)
  if launcher == "flags":
    return [
      f"--coordinator_address=127.0.0.1:{port}",
      f"--num_processes={num_processes}",
      f"--process_id={process_id}",
    ], {}
  if launcher == "slurm":  # As srun -n N on one node sets them.
    return [], {
      "SLURM_JOB_ID": "4242",
      "SLURM_STEP_NODELIST": "localhost",
      "SLURM_NTASKS": str(num_processes),
      "SLURM_PROCID": task,
      "SLURM_LOCALID": task,
      "SLURM_NODEID": "0",
      "SLURM_STEP_TASKS_PER_NODE": str(num_processes),
      "JAX_COORDINATOR_PORT": str(port),
    }
  if launcher == "ompi":  # As Open MPI 4's mpirun -np N on one host sets them.
    return [], {
      "OMPI_MCA_orte_hnp_uri": "1531576320.0;tcp://127.0.0.1:34911",
      "OMPI_COMM_WORLD_SIZE": str(num_processes),
      "OMPI_COMM_WORLD_RANK": task,
      "OMPI_COMM_WORLD_LOCAL_RANK": task,
      "OMPI_COMM_WORLD_LOCAL_SIZE": str(num_processes),
      "JAX_COORDINATOR_PORT": str(port),
    }
  raise ValueError(f"unknown launcher {launcher!r}")


class TwoProcesses(NamedTuple):
  codes: list  # The two return codes.
  errors: str  # The tail of both processes' stderr, for a failure message.
  stderr: list  # Each process's whole stderr.


def run_two_processes(
  workdir, extra_flags=(), timeout=300, config="configs/bert_tiny.py", launcher="flags"
):
  """`bert_jax.main` as two processes on localhost (2 fake devices each), as a pod's hosts run,
  joined by coordinator flags or by a cluster's variables (``launcher``: see `launcher_env`)."""
  port = free_port()
  commands = [launcher_env(launcher, i, 2, port) for i in range(2)]
  processes = [
    start_main(workdir, [*extra_flags, *flags], devices=2, config=config, **environ)
    for flags, environ in commands
  ]
  try:
    errors = [p.communicate(timeout=timeout)[1] for p in processes]
  finally:
    for p in processes:
      p.kill()
  tails = errors[0][-3000:] + errors[1][-3000:]
  return TwoProcesses([p.returncode for p in processes], tails, errors)


def read_metrics(workdir, split="train"):
  path = pathlib.Path(workdir) / "metrics.jsonl"
  return [row for row in map(json.loads, path.read_text().splitlines()) if row["split"] == split]


def checkpoint_steps(workdir):
  directory = pathlib.Path(workdir) / "checkpoints"
  return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def restore_params(workdir, step):
  """The params of a checkpoint as numpy arrays (no model or mesh needed)."""
  path = pathlib.Path(workdir) / "checkpoints" / str(step) / "state"
  device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  with ocp.StandardCheckpointer() as checkpointer:
    metadata = checkpointer.metadata(path).item_metadata.tree
    target = jax.tree.map(
      lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device), metadata
    )
    state = checkpointer.restore(path, target)
  return {"/".join(map(str, k)): np.asarray(v) for k, v in _flatten(state["params"])}


def _flatten(tree, prefix=()):
  for key, value in tree.items():
    if isinstance(value, dict):
      yield from _flatten(value, prefix + (key,))
    else:
      yield prefix + (key,), value


def small_corpus(directory, documents=24, sentences=40):
  """The first ``documents`` documents of the embedded corpus, ``sentences`` lines each, as a
  text file in ``directory``; returns its path.

  A run on the whole embedded corpus spends more time splitting and tokenising its 97
  documents than a few steps of bert_tiny take to compile and train; tests whose point is not
  the data (resume, preemption, locks, errors) train on this share of it instead.
  """
  text = pathlib.Path(default_corpus.default_corpus_path()).read_text(encoding="utf-8")
  kept = ["\n".join(d.splitlines()[:sentences]) for d in text.split("\n\n")[:documents]]
  path = pathlib.Path(directory) / "small_corpus.txt"
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("\n\n".join(kept) + "\n", encoding="utf-8")
  return path


def small_corpus_keys(directory):
  """Config keys training on `small_corpus` (written into ``directory``), a fifth held out."""
  return {"data.corpus_paths": (str(small_corpus(directory)),), "data.eval_fraction": 0.2}


def quick_flags(directory, **overrides):
  """`small_flags` on `small_corpus` (see `small_corpus_keys`)."""
  return small_flags(**{**small_corpus_keys(directory), **overrides})
