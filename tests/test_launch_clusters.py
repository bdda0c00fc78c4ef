"""launch/slurm/ and launch/k8s/: the sbatch command and the manifest their dry runs print, the
same submitted for real (to a stand-in sbatch / kubectl), the batch script's one srun line, the
manifest's shape, one-line exit-2 errors for bad input, and shellcheck."""

import os
import pathlib
import shlex
import subprocess
import sys

import pytest
import yaml

from tests import shellcheck_run

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = ("launch/slurm/submit.sh", "launch/slurm/train.sbatch", "launch/k8s/submit.sh")
K8S = ("--name=bert-base", "--image=us-docker.pkg.dev/p/r/bert_jax:1", "--workdir=gs://b/run")


def _launch(script, *args, env=None):
  return subprocess.run(
    [str(REPO / script), *args],
    capture_output=True,
    text=True,
    env=env,
    cwd=REPO,
    timeout=60,
    check=False,
  )


def _dry_run(script, *args):
  result = _launch(script, *args, "--dry-run")
  assert (result.returncode, result.stderr) == (0, "")
  return result.stdout


def _recorder(tmp_path, name):
  """An environment whose ``name`` command writes its arguments, environment and input to files."""
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir(exist_ok=True)
  stub = bin_dir / name
  stub.write_text(f"""#!{sys.executable}
import json, os, sys
with open({str(tmp_path / name)!r} + ".json", "w") as f:
  json.dump({{"argv": sys.argv[1:], "env": dict(os.environ), "stdin": sys.stdin.read()}}, f)
""")
  stub.chmod(0o755)
  return dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def _recorded(tmp_path, name):
  return yaml.safe_load((tmp_path / f"{name}.json").read_text())  # JSON is YAML.


SBATCH = (
  "sbatch --job-name=bert_jax --nodes=2 --ntasks-per-node=8 --gpus-per-node=8 --partition=gpu"
  " --time=24:00:00 --export=ALL,BERT_JAX_PYTHON=python launch/slurm/train.sbatch"
  ' --config=configs/bert_large.py --workdir=/shared/large --config.data.tfrecord_pattern="/d/t-*"'
)
SLURM = (
  "--workdir=/shared/large",
  "--config=configs/bert_large.py",
  "--nodes=2",
  "--tasks-per-node=8",
  "--partition=gpu",
  "--time=24:00:00",
  "--config.data.tfrecord_pattern=/d/t-*",
)


def test_slurm_dry_run_and_submission(tmp_path):
  assert _dry_run("launch/slurm/submit.sh", *SLURM).splitlines() == [SBATCH]
  result = _launch("launch/slurm/submit.sh", *SLURM, env=_recorder(tmp_path, "sbatch"))
  assert result.returncode == 0, result.stderr
  assert result.stderr == f"+ {SBATCH}\n"
  assert _recorded(tmp_path, "sbatch")["argv"] == shlex.split(SBATCH)[1:]


def test_slurm_batch_script_is_one_srun_line_with_per_task_logs(tmp_path):
  """What sbatch runs on the first node: srun starting every task, NCCL's logging set, each
  task's output in its own file, the trainer's flags passed through."""
  env = _recorder(tmp_path, "srun")
  env.update(BERT_JAX_PYTHON="/venv/bin/python", BERT_JAX_LOG_DIR=str(tmp_path / "logs"))
  env.pop("NCCL_DEBUG", None)
  flags = ("--config=configs/bert_base.py", "--workdir=/shared/base")
  result = _launch("launch/slurm/train.sbatch", *flags, env=env)
  assert result.returncode == 0, result.stderr
  srun = _recorded(tmp_path, "srun")
  assert srun["argv"] == [
    "--kill-on-bad-exit=1",
    "--open-mode=append",
    f"--output={tmp_path}/logs/%x-%j-task%t.log",
    "/venv/bin/python",
    "-m",
    "bert_jax.main",
    *flags,
  ]
  assert srun["env"]["NCCL_DEBUG"] == "WARN" and (tmp_path / "logs").is_dir()
  options = [
    line.removeprefix("#SBATCH ")
    for line in (REPO / "launch/slurm/train.sbatch").read_text().splitlines()
    if line.startswith("#SBATCH ")
  ]
  assert {"--requeue", "--signal=TERM@300", "--open-mode=append", "--exclusive"} <= set(options)


def _manifest(*flags):
  return list(yaml.safe_load_all(_dry_run("launch/k8s/submit.sh", *K8S, *flags)))


def test_k8s_manifest_is_an_indexed_jobset_that_jax_can_join():
  documents = _manifest("--nodes=4", "--gpus-per-node=8", "--config.num_train_steps=10")
  for document in documents:
    assert {"apiVersion", "kind", "metadata"} <= document.keys()
    assert document["metadata"]["name"] == "bert-base"
  by_kind = {d["kind"]: d for d in documents}
  assert sorted(by_kind) == ["JobSet", "Role", "RoleBinding", "ServiceAccount"]
  jobset = by_kind["JobSet"]
  assert jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
  [workers] = jobset["spec"]["replicatedJobs"]
  assert workers["replicas"] == 1  # jax counts one Job's pods.
  job = workers["template"]["spec"]
  assert job["completionMode"] == "Indexed"
  assert job["parallelism"] == job["completions"] == 4
  pod = job["template"]["spec"]
  assert pod["serviceAccountName"] == "bert-base" and pod["restartPolicy"] == "Never"
  assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
  [container] = pod["containers"]
  assert container["command"] + container["args"] == [
    "python",
    "-m",
    "bert_jax.main",
    "--config=configs/bert_base.py",
    "--workdir=gs://b/run",
    "--config.num_train_steps=10",
  ]
  assert container["resources"]["limits"] == {"nvidia.com/gpu": 8}
  env = {e["name"]: e["value"] for e in container["env"]}
  assert env["JAX_COORDINATOR_PORT"] == "55527" and "NCCL_DEBUG" in env
  assert container["ports"] == [{"containerPort": 55527}]
  # jax's Kubernetes detector reads pods and jobs through the API.
  rules = {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in by_kind["Role"]["rules"]}
  assert "list" in rules[("", "pods")] and "get" in rules[("batch", "jobs")]
  assert by_kind["RoleBinding"]["subjects"][0]["name"] == "bert-base"


def test_k8s_arguments_reach_the_container_as_given(tmp_path):
  awkward = '--config.data.tfrecord_pattern=gs://b/it\'s "here"/a&b\\c-*'
  [*_, jobset] = _manifest(awkward)
  container = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
  assert container["containers"][0]["args"][-1] == awkward
  printed = _dry_run("launch/k8s/submit.sh", *K8S, awkward)
  result = _launch("launch/k8s/submit.sh", *K8S, awkward, env=_recorder(tmp_path, "kubectl"))
  assert result.returncode == 0, result.stderr
  kubectl = _recorded(tmp_path, "kubectl")
  assert kubectl["argv"] == ["apply", "-f", "-"] and kubectl["stdin"] == printed


@pytest.mark.parametrize(
  "script,flags,message",
  [
    ("launch/slurm/submit.sh", (), "error: missing --workdir=DIR"),
    ("launch/slurm/submit.sh", ("--workdir=runs/a",), "error: bad --workdir='runs/a': every node"),
    (
      "launch/slurm/submit.sh",
      ("--workdir=/s/a", "--tasks-per-node=4"),
      "error: bad --tasks-per-node='4': 1 (one process per node) or 8 (one per GPU)",
    ),
    ("launch/slurm/submit.sh", ("--workdir=/s/a", "--nodes=0"), "error: bad --nodes='0'"),
    ("launch/slurm/submit.sh", ("--workdir=/s/a", "--partition="), "error: empty --partition="),
    ("launch/slurm/submit.sh", ("--workdir=/s/a", "--zone=x"), "error: unknown flag '--zone=x'"),
    ("launch/k8s/submit.sh", K8S[1:], "error: missing --name=NAME"),
    ("launch/k8s/submit.sh", ("--name=Bert", *K8S[1:]), "error: bad --name='Bert'"),
    ("launch/k8s/submit.sh", (K8S[0], K8S[2]), "error: missing --image=IMAGE"),
    ("launch/k8s/submit.sh", (*K8S[:2], "--workdir=/tmp/x"), "error: bad --workdir='/tmp/x'"),
    ("launch/k8s/submit.sh", (*K8S, "--nodes=two"), "error: bad --nodes='two'"),
  ],
)
def test_bad_input_is_one_line_and_exit_2(script, flags, message):
  result = _launch(script, *flags, "--dry-run")
  assert (result.returncode, result.stdout) == (2, "")
  assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(message), result.stderr


def test_scripts_pass_shellcheck():
  result = shellcheck_run.shellcheck(SCRIPTS)
  assert result.returncode == 0, result.stdout
