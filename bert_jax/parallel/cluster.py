"""Joining a multi-process run: explicit coordinator flags, or the cluster that started us.

`jax.distributed.initialize()` already finds its peers under SLURM's ``srun``, Open MPI's
``mpirun``, Kubernetes indexed Jobs and multi-host Cloud TPU slices. This module decides
*whether* to call it (a plain process, or a one-task job step, stays single and never waits),
which local devices a process drives, and turns the two ways a join goes wrong into one line:
cluster variables it cannot use, and peers that never arrive.

The environments are recognised by the variables jax's own detectors read (jax/_src/clusters/),
so that where this module says "SLURM", jax finds the same coordinator, count and index.
"""

import dataclasses
import importlib.util
import os
import re
import sys
import threading
from collections.abc import Mapping

import jax
from absl import logging
from jax._src import distributed as jax_distributed

from bert_jax.errors import UserInputError

# Each variable set that jax's detectors require, in the order jax tries them.
_SLURM_VARS = (
  "SLURM_JOB_ID",
  "SLURM_STEP_NODELIST",
  "SLURM_NTASKS",
  "SLURM_PROCID",
  "SLURM_LOCALID",
)
_OMPI_URI = "OMPI_MCA_orte_hnp_uri"  # Set by Open MPI 4's mpirun; jax reads the coordinator here.
_KUBERNETES = "Kubernetes indexed Job"
# What a plain process may inherit from a cluster without being one task of a run (an sbatch
# script's own shell, salloc, a pod that is not an indexed Job).
_STRAY_VARS = ("SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE", "JOB_COMPLETION_INDEX", "PMI_RANK")

# jax aborts the process (no Python exception) when its own deadline passes; ours comes first so
# that the failure is one line. The margin lets ours fire even on a loaded host.
_JAX_DEADLINE_MARGIN_S = 30


@dataclasses.dataclass(frozen=True)
class Environment:
  """A cluster that started this process as one task of a multi-process run.

  Attributes:
    name: what the first log line calls it, e.g. "SLURM (srun)".
    num_processes: tasks in the run; None where only jax can ask the cluster (Kubernetes).
    process_id: this task's index.
    local_rank: this task's index among the tasks on its host; None where unknown.
    local_size: tasks on this host; None where unknown.
  """

  name: str
  num_processes: int | None
  process_id: int
  local_rank: int | None = None
  local_size: int | None = None


def _slurm_tasks_on_node(environ: Mapping[str, str]) -> int | None:
  """Tasks of this job step on this node, from SLURM_STEP_TASKS_PER_NODE ("2(x3),1")."""
  layout = environ.get("SLURM_STEP_TASKS_PER_NODE") or environ.get("SLURM_TASKS_PER_NODE")
  node = environ.get("SLURM_NODEID")
  if not layout or node is None:
    return None
  counts = []
  for part in layout.split(","):
    match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
    if match is None:
      return None
    counts += [int(match[1])] * int(match[2] or 1)
  return counts[int(node)] if int(node) < len(counts) else None


def detect(environ: Mapping[str, str] = os.environ) -> Environment | None:
  """The cluster that started this process as a task of a multi-process run, if any.

  Args:
    environ: the process environment.

  Returns:
    The environment, or None for a process that no cluster started (see `stray_note`).
  """
  if _OMPI_URI in environ:
    return Environment(
      "Open MPI (mpirun)",
      int(environ["OMPI_COMM_WORLD_SIZE"]),
      int(environ["OMPI_COMM_WORLD_RANK"]),
      int(environ["OMPI_COMM_WORLD_LOCAL_RANK"]),
      int(environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", 0)) or None,
    )
  if all(name in environ for name in _SLURM_VARS):
    return Environment(
      "SLURM (srun)",
      int(environ["SLURM_NTASKS"]),
      int(environ["SLURM_PROCID"]),
      int(environ["SLURM_LOCALID"]),
      _slurm_tasks_on_node(environ),
    )
  workers = environ.get("TPU_WORKER_HOSTNAMES", "")
  if "," in workers:  # A multi-host slice; one host needs no coordinator.
    return Environment(
      "Cloud TPU slice", len(workers.split(",")), int(environ.get("TPU_WORKER_ID", 0))
    )
  if "KUBERNETES_SERVICE_HOST" in environ and "JOB_COMPLETION_INDEX" in environ:
    # One pod per node: the pod drives every GPU it was given.
    return Environment(_KUBERNETES, None, int(environ["JOB_COMPLETION_INDEX"]), 0, 1)
  return None


def unjoinable(env: Environment | None, environ: Mapping[str, str] = os.environ) -> str | None:
  """Why jax cannot join the run a launcher started without coordinator flags; None if it can."""
  if env is None and int(environ.get("OMPI_COMM_WORLD_SIZE", 1)) > 1:
    return (
      f"Open MPI started {environ['OMPI_COMM_WORLD_SIZE']} processes without {_OMPI_URI} (Open "
      "MPI 5's mpirun), so jax cannot find their coordinator; pass --coordinator_address="
      "HOST:PORT (a free port on rank 0's host) --num_processes=$OMPI_COMM_WORLD_SIZE "
      "--process_id=$OMPI_COMM_WORLD_RANK"
    )
  if env is not None and env.name == _KUBERNETES and not importlib.util.find_spec("kubernetes"):
    return (
      f"this pod is task {env.process_id} of a Kubernetes indexed Job, and jax asks the cluster "
      "for its peers with the kubernetes package, which is missing; install it in the image: "
      "pip install 'bert_jax[k8s]'"
    )
  return None


def stray_note(environ: Mapping[str, str] = os.environ) -> str | None:
  """Why a process with some cluster variables but no usable set runs alone; None if none."""
  present = [name for name in _STRAY_VARS if name in environ]
  if not present:
    return None
  if "SLURM_JOB_ID" in present:
    missing = [name for name in _SLURM_VARS if name not in environ]
    hint = f"not {', '.join(missing)}, which srun sets for each task"
  else:
    hint = "not the rest of a launcher's variables"
  return f"{', '.join(present)} set but {hint}: running as one process"


def local_device_ids(
  env: Environment | None, environ: Mapping[str, str] = os.environ
) -> list[int] | None:
  """The local GPUs this process drives, in `jax.distributed.initialize`'s terms.

  jax's own default under SLURM and Open MPI is one GPU per process, the one at the local
  rank, even where one process per host should drive all of them; hence the choice here.

  Args:
    env: the detected environment (None: explicit flags only).
    environ: the process environment (for CUDA_VISIBLE_DEVICES and JAX_LOCAL_DEVICE_IDS).

  Returns:
    None to leave the choice to jax (JAX_LOCAL_DEVICE_IDS set, or a TPU slice, where jax never
    restricts devices); [] for every visible device (one process on the host, or a launcher
    that already gave each task its own GPU through CUDA_VISIBLE_DEVICES); [local rank] for
    one process per GPU among several visible ones. CPU devices are never restricted.
  """
  if "JAX_LOCAL_DEVICE_IDS" in environ:
    return None
  if env is None or env.local_rank is None:
    return [] if env is None else None
  if env.local_size == 1:
    return []
  visible = environ.get("CUDA_VISIBLE_DEVICES")
  if visible is not None and len(visible.split(",")) == 1:
    return []
  return [env.local_rank]


def _coordinator_address(explicit: str | None) -> str | None:
  """The address jax connects to: the flag, or what jax's detector worked out for the cluster."""
  # jax keeps a detected address only in its private state, set before it connects.
  return explicit or jax_distributed.global_state.coordinator_address


def _exit_after(timeout_s: float, who: str, explicit: str | None) -> threading.Timer:
  """A timer that ends the process with one ``error:`` line if the join outlasts ``timeout_s``."""

  def give_up():
    address = _coordinator_address(explicit) or "unknown: the cluster did not name it in time"
    print(
      f"error: {who}: the other processes did not join within {timeout_s:g} s (coordinator "
      f"{address}); check that every task started and can reach that host and port, or raise "
      "--cluster_timeout_s",
      file=sys.stderr,
      flush=True,
    )
    os._exit(2)  # pylint: disable=protected-access

  timer = threading.Timer(timeout_s, give_up)
  timer.daemon = True
  return timer


def _initialize(
  env: Environment | None,
  who: str,
  flags: tuple[str | None, int | None, int | None],
  timeout_s: float,
  environ: Mapping[str, str],
):
  """`jax.distributed.initialize`, given up on with one line after ``timeout_s``."""
  coordinator_address, num_processes, process_id = flags
  timer = _exit_after(timeout_s, who, coordinator_address)
  timer.start()
  try:
    jax.distributed.initialize(
      coordinator_address=coordinator_address,
      num_processes=num_processes,
      process_id=process_id,
      local_device_ids=local_device_ids(env, environ),
      initialization_timeout=int(timeout_s) + _JAX_DEADLINE_MARGIN_S,
    )
  finally:
    timer.cancel()


def join(
  coordinator_address: str | None = None,
  num_processes: int | None = None,
  process_id: int | None = None,
  timeout_s: float = 300,
  environ: Mapping[str, str] = os.environ,
) -> str:
  """Joins the multi-process run this process belongs to, if any, and logs what it found.

  Explicit values override what the cluster says; with none and no cluster the process runs
  alone without waiting for anyone.

  Args:
    coordinator_address: host:port of process 0 (``--coordinator_address``).
    num_processes: processes in the run (needs ``coordinator_address`` or a cluster).
    process_id: this process's index (needs ``coordinator_address`` or a cluster).
    timeout_s: how long to wait for the other processes before exiting with status 2.
    environ: the process environment.

  Returns:
    The log line naming the environment, process i of n and local / global devices.

  Raises:
    UserInputError: unusable flags or cluster variables, one line.
  """
  if timeout_s <= 0:
    raise UserInputError(f"--cluster_timeout_s={timeout_s:g} must be positive, e.g. 300")
  env = detect(environ)
  problem = None if coordinator_address else unjoinable(env, environ)
  if problem:
    raise UserInputError(problem)
  if env is None and (coordinator_address, num_processes, process_id).count(None) in (1, 2):
    raise UserInputError(
      "outside a cluster that names them, pass all of --coordinator_address=HOST:PORT (process "
      "0's host and a free port), --num_processes=N and --process_id=I, or none"
    )
  if coordinator_address is None and env is not None and env.num_processes == 1:
    name, env = f"{env.name} with one task: running as one process", None
  elif coordinator_address is not None:
    name = f"--coordinator_address with {env.name}" if env else "--coordinator_address"
  else:
    name = env.name if env else stray_note(environ) or "one process"
  if coordinator_address is not None or env is not None:
    index = process_id if process_id is not None else env and env.process_id
    count = num_processes or (env and env.num_processes) or "?"
    who = f"{name}, process {index} of {count}"
    _initialize(env, who, (coordinator_address, num_processes, process_id), timeout_s, environ)
    name += f", coordinator {_coordinator_address(coordinator_address)}"
  line = (
    f"{name}; process {jax.process_index()} of {jax.process_count()}; "
    f"{jax.local_device_count()} local / {jax.device_count()} global devices "
    f"({jax.devices()[0].device_kind})"
  )
  logging.info("%s", line)
  return line
