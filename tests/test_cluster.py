"""Joining a cluster's run (bert_jax/parallel/cluster.py): what each launcher's variables mean,
which GPUs a process drives, stray variables, and peers that never arrive. The two-process runs
that srun's and mpirun's variables join are in test_train_loop.py."""

import importlib.util
import time

import jax
import pytest

from bert_jax.errors import UserInputError
from bert_jax.parallel import cluster
from tests import run_helpers


def _slurm(tasks=2, task=1, per_node="2", **extra):
  _, environ = run_helpers.launcher_env("slurm", task, tasks, 1234)
  environ["SLURM_STEP_TASKS_PER_NODE"] = per_node
  return {**environ, **extra}


def _ompi(tasks=2, task=1, **extra):
  return {**run_helpers.launcher_env("ompi", task, tasks, 1234)[1], **extra}


@pytest.mark.parametrize(
  "environ,expected",
  [
    (_slurm(), cluster.Environment("SLURM (srun)", 2, 1, 1, 2)),
    # Two nodes of 2 tasks then one of 1: node 2's only task.
    (
      _slurm(5, 4, "2(x2),1", SLURM_NODEID="2", SLURM_LOCALID="0"),
      cluster.Environment("SLURM (srun)", 5, 4, 0, 1),
    ),
    (_ompi(), cluster.Environment("Open MPI (mpirun)", 2, 1, 1, 2)),
    # mpirun inside an sbatch job: Open MPI's variables win, as in jax's own order.
    ({**_slurm(), **_ompi(4, 3)}, cluster.Environment("Open MPI (mpirun)", 4, 3, 3, 4)),
    (
      {"TPU_WORKER_HOSTNAMES": "10.0.0.2,10.0.0.3", "TPU_WORKER_ID": "1"},
      cluster.Environment("Cloud TPU slice", 2, 1),
    ),
    ({"TPU_WORKER_HOSTNAMES": "localhost"}, None),  # One host: nothing to join.
    ({"SLURM_JOB_ID": "77"}, None),  # An sbatch script's own shell, salloc: not a task.
    ({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, None),  # A pod, not an indexed Job's.
    ({}, None),
  ],
)
def test_detects_the_launcher_by_the_variables_jax_reads(environ, expected):
  assert cluster.detect(environ) == expected


# Open MPI 5's mpirun: its ranks, but not the URI jax finds the coordinator in.
OPEN_MPI_5 = {"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "1"}


def test_unusable_launches_are_one_line():
  with pytest.raises(UserInputError, match=r"without OMPI_MCA_orte_hnp_uri .*--coordinator_add"):
    cluster.join(environ=OPEN_MPI_5)
  kubernetes = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "JOB_COMPLETION_INDEX": "3"}
  assert cluster.detect(kubernetes) == cluster.Environment("Kubernetes indexed Job", None, 3, 0, 1)
  if importlib.util.find_spec("kubernetes") is None:
    with pytest.raises(UserInputError, match=r"task 3 of a Kubernetes .* 'bert_jax\[k8s\]'"):
      cluster.join(environ=kubernetes)
  with pytest.raises(UserInputError, match=r"pass all of --coordinator_address=HOST:PORT"):
    cluster.join(num_processes=2, process_id=0, environ={})
  with pytest.raises(UserInputError, match=r"--cluster_timeout_s=0 must be positive"):
    cluster.join(timeout_s=0, environ={})


@pytest.mark.parametrize(
  "environ,expected",
  [
    (_slurm(per_node="1", SLURM_LOCALID="0"), []),  # One process per node drives all its GPUs.
    (_slurm(), [1]),  # One process per GPU: the local rank's.
    (_slurm(CUDA_VISIBLE_DEVICES="3"), []),  # srun --gpus-per-task=1 already gave it one.
    (_slurm(CUDA_VISIBLE_DEVICES="0,1,2,3"), [1]),
    (_slurm(JAX_LOCAL_DEVICE_IDS="2"), None),  # The user's own choice, which jax reads.
    (_ompi(), [1]),
    ({"TPU_WORKER_HOSTNAMES": "a,b"}, None),  # jax never restricts TPU devices.
  ],
)
def test_local_devices_one_per_gpu_or_all(environ, expected):
  assert cluster.local_device_ids(cluster.detect(environ), environ) == expected


@pytest.mark.parametrize(
  "environ,expected",
  [
    (
      {"SLURM_JOB_ID": "77"},
      "SLURM_JOB_ID set but not SLURM_STEP_NODELIST, SLURM_NTASKS, SLURM_PROCID, "
      "SLURM_LOCALID, which srun sets for each task: running as one process",
    ),
    (_slurm(1, 0, "1"), "SLURM (srun) with one task: running as one process"),
    ({}, "one process"),
  ],
)
def test_a_process_no_cluster_can_use_runs_alone_and_says_so(environ, expected):
  devices = jax.device_count()
  line = cluster.join(environ=environ)
  assert line == f"{expected}; process 0 of 1; {devices} local / {devices} global devices (cpu)"


@pytest.mark.parametrize(
  "flags,environ,expected",
  [
    # Explicit flags win over the cluster's; the GPU choice still follows the task layout.
    (("10.0.0.5:1234", 4, 3), _slurm(), ("10.0.0.5:1234", 4, 3, [1])),
    (("10.0.0.5:1234", 4, 3), {}, ("10.0.0.5:1234", 4, 3, [])),
    (("10.0.0.5:1234", 4, 1), OPEN_MPI_5, ("10.0.0.5:1234", 4, 1, [])),  # The flags it asks for.
    ((None, None, None), _ompi(), (None, None, None, [1])),  # jax reads the rest from the cluster.
    ((None, None, None), _slurm(1, 0, "1"), None),  # One task: nothing to join.
  ],
)
def test_what_jax_distributed_is_asked(monkeypatch, flags, environ, expected):
  calls = []
  monkeypatch.setattr(jax.distributed, "initialize", lambda **kwargs: calls.append(kwargs))
  cluster.join(*flags, timeout_s=5, environ=environ)
  keys = ("coordinator_address", "num_processes", "process_id", "local_device_ids")
  assert [tuple(call[k] for k in keys) for call in calls] == ([expected] if expected else [])
  assert all(call["initialization_timeout"] > 5 for call in calls)  # Ours ends the wait first.


def test_peers_that_never_arrive_end_the_run_naming_the_coordinator(tmp_path):
  port = run_helpers.free_port()
  _, environ = run_helpers.launcher_env("slurm", 1, 2, port)
  start = time.monotonic()
  result = run_helpers.run_main(tmp_path, ["--cluster_timeout_s=2"], timeout=120, **environ)
  assert result.returncode == 2
  assert time.monotonic() - start < 60  # jax alone would wait its own 300 s.
  assert result.stderr.strip().splitlines()[-1] == (
    "error: SLURM (srun), process 1 of 2: the other processes did not join within 2 s "
    f"(coordinator localhost:{port}); check that every task started and can reach that host "
    "and port, or raise --cluster_timeout_s"
  )
