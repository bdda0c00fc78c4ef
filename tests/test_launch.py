"""launch/: the exact commands every script prints with --dry-run, the same commands run for
real (against a stand-in gcloud / python that records its arguments), one-line exit-2 errors
for bad input, and shellcheck."""

import json
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import tarfile
import time

import pytest

from tests import shellcheck_run

REPO = pathlib.Path(__file__).resolve().parents[1]
LAUNCH = REPO / "launch"
SLICE = ("--name=bert-base", "--zone=us-central2-b", "--project=my-proj")
SSH = "gcloud compute tpus tpu-vm ssh bert-base --zone=us-central2-b --project=my-proj"
INSTALL = (
  "sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq"
  " -o DPkg::Lock::Timeout=300 python3.11 python3.11-venv && rm -rf ~/bert_jax && {fetch}"
  " && python3.11 -m venv ~/bert_jax_venv && ~/bert_jax_venv/bin/pip install -q -U pip"
  ' && ~/bert_jax_venv/bin/pip install -q "jax[tpu]==0.10.2"'
  " -f https://storage.googleapis.com/jax-releases/libtpu_releases.html -e ~/bert_jax"
)


def _launch(script, *args, env=None):
  return subprocess.run(
    [str(LAUNCH / script), *args], capture_output=True, text=True, env=env, timeout=60, check=False
  )


def _dry_run(script, *args, env=None):
  result = _launch(script, *args, "--dry-run", env=env)
  assert (result.returncode, result.stderr) == (0, "")
  return result.stdout.splitlines()


@pytest.fixture(name="fake_gcloud")
def _fake_gcloud(tmp_path):
  """An environment whose `gcloud` only appends its arguments, as JSON, to a log."""
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  log = tmp_path / "gcloud.jsonl"
  gcloud = bin_dir / "gcloud"
  gcloud.write_text(f"""#!{sys.executable}
import json, sys
with open({str(log)!r}, "a") as f:
  f.write(json.dumps(sys.argv[1:]) + "\\n")
""")
  gcloud.chmod(0o755)
  env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", TMPDIR=str(tmp_path))
  return env, log


def _gcloud_calls(log):
  return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _as_argv(lines):
  """The printed gcloud lines as the argument lists a shell would pass to gcloud."""
  return [shlex.split(line)[1:] for line in lines if line.startswith("gcloud ")]


V4_32 = "--accelerator-type=v4-32 --version=tpu-ubuntu2204-base"
V5E_16 = "--accelerator-type=v5litepod-16 --version=v2-alpha-tpuv5-lite"
CREATE = "gcloud compute tpus tpu-vm create bert-base --zone=us-central2-b --project=my-proj"
QUEUE = (
  "gcloud compute tpus queued-resources create bert-base --node-id=bert-base"
  " --zone=us-central2-b --project=my-proj"
)


@pytest.mark.parametrize(
  "accelerator,flags,expected",
  [
    ("v4-32", (), f"{CREATE} {V4_32}"),
    ("v4-32", ("--spot",), f"{CREATE} {V4_32} --spot"),
    ("v5litepod-16", (), f"{CREATE} {V5E_16}"),
    ("v5litepod-16", ("--spot",), f"{CREATE} {V5E_16} --spot"),
    (
      "v4-32",
      ("--queued",),
      f"{QUEUE} --accelerator-type=v4-32 --runtime-version=tpu-ubuntu2204-base",
    ),
    (
      "v4-32",
      ("--queued", "--spot"),
      f"{QUEUE} --accelerator-type=v4-32 --runtime-version=tpu-ubuntu2204-base --spot",
    ),
    (
      "v5litepod-16",
      ("--queued",),
      f"{QUEUE} --accelerator-type=v5litepod-16 --runtime-version=v2-alpha-tpuv5-lite",
    ),
    (
      "v5litepod-16",
      ("--queued", "--spot"),
      f"{QUEUE} --accelerator-type=v5litepod-16 --runtime-version=v2-alpha-tpuv5-lite --spot",
    ),
    (
      "v5litepod-16",
      ("--queued", "--reserved"),
      f"{QUEUE} --accelerator-type=v5litepod-16 --runtime-version=v2-alpha-tpuv5-lite --reserved",
    ),
    ("v5p-32", (), f"{CREATE} --accelerator-type=v5p-32 --version=v2-alpha-tpuv5"),
    ("v6e-16", ("--spot",), f"{CREATE} --accelerator-type=v6e-16 --version=v2-alpha-tpuv6e --spot"),
    (
      "v4-128",
      ("--version=tpu-ubuntu2204-base",),
      f"{CREATE} --accelerator-type=v4-128 --version=tpu-ubuntu2204-base",
    ),
  ],
)
def test_create_dry_run(accelerator, flags, expected):
  assert _dry_run("create.sh", *SLICE, f"--accelerator={accelerator}", *flags) == [expected]


def test_setup_dry_run_from_git():
  lines = _dry_run("setup.sh", *SLICE, "--git=https://github.com/me/bert_jax.git", "--ref=v0.1")
  fetch = (
    "git clone -q https://github.com/me/bert_jax.git ~/bert_jax"
    " && git -C ~/bert_jax checkout -q v0.1"
  )
  assert lines == [f"{SSH} --worker=all --command='{INSTALL.format(fetch=fetch)}'"]


def _tiny_checkout(root):
  """A git checkout with a tracked file, an untracked one and an ignored one."""
  root.mkdir()
  subprocess.run(["git", "init", "-q", str(root)], check=True)
  (root / ".gitignore").write_text("ignored/\n")
  (root / "configs").mkdir()
  (root / "configs" / "bert_tiny.py").write_text("# tracked\n")
  (root / "new file.py").write_text("# untracked, not ignored\n")
  (root / "ignored").mkdir()
  (root / "ignored" / "big.bin").write_text("x")
  subprocess.run(["git", "-C", str(root), "add", "configs/bert_tiny.py"], check=True)


def test_setup_copies_the_checkout_to_every_worker(tmp_path, fake_gcloud):
  env, log = fake_gcloud
  source = tmp_path / "my checkout"
  _tiny_checkout(source)
  archive = tmp_path / "bert_jax-bert-base.tar.gz"
  fetch = "mkdir ~/bert_jax && tar -xzf ~/bert_jax.tar.gz -C ~/bert_jax"
  lines = _dry_run("setup.sh", *SLICE, f"--source={source}", env=env)
  assert lines == [
    (
      f'git -C "{source}" ls-files -z --cached --others --exclude-standard'
      f' | tar -C "{source}" --null -T - -czf {archive}'
    ),
    (
      f"gcloud compute tpus tpu-vm scp {archive} bert-base:bert_jax.tar.gz"
      " --zone=us-central2-b --project=my-proj --worker=all"
    ),
    f"{SSH} --worker=all --command='{INSTALL.format(fetch=fetch)}'",
  ]
  assert not archive.exists() and not log.exists()  # A dry run runs nothing.

  result = _launch("setup.sh", *SLICE, f"--source={source}", env=env)
  assert result.returncode == 0, result.stderr
  assert _gcloud_calls(log) == _as_argv(lines)
  with tarfile.open(archive) as packed:
    assert sorted(packed.getnames()) == [".gitignore", "configs/bert_tiny.py", "new file.py"]


RUN_V4 = (
  f"{SSH} --worker=all --command='cd ~/bert_jax && {{ nohup ~/bert_jax_venv/bin/python"
  " -m bert_jax.main --config=configs/bert_base.py --workdir=gs://my-bucket/bert_base"
  ' --config.data.tfrecord_pattern="gs://my-bucket/wiki_128/train-*"'
  " >> ~/bert_jax_run.log 2>&1 < /dev/null & echo $! > ~/bert_jax_run.pid; }'"
)


@pytest.mark.parametrize("accelerator", ["v4-32", "v5litepod-16"])
def test_run_dry_run(accelerator):
  lines = _dry_run(
    "run.sh",
    *SLICE,
    f"--accelerator={accelerator}",
    "--config=configs/bert_base.py",
    "--workdir=gs://my-bucket/bert_base",
    "--config.data.tfrecord_pattern=gs://my-bucket/wiki_128/train-*",
  )
  assert lines == [RUN_V4]


def test_run_single_host_takes_a_local_workdir():
  lines = _dry_run(
    "run.sh", *SLICE, "--accelerator=v4-8", "--config=configs/bert_tiny.py", "--workdir=/tmp/tiny"
  )
  assert lines == [
    (
      f"{SSH} --worker=all --command='cd ~/bert_jax && {{ nohup ~/bert_jax_venv/bin/python"
      " -m bert_jax.main --config=configs/bert_tiny.py --workdir=/tmp/tiny"
      " >> ~/bert_jax_run.log 2>&1 < /dev/null & echo $! > ~/bert_jax_run.pid; }'"
    )
  ]


@pytest.mark.parametrize(
  "flags,expected",
  [
    ((), f'{SSH} --worker=0 --command="tail -n 100 ~/bert_jax_run.log"'),
    (
      ("--worker=all", "--lines=20", "--follow"),
      f'{SSH} --worker=all --command="tail -n 20 -F ~/bert_jax_run.log"',
    ),
  ],
)
def test_tail_dry_run(flags, expected):
  assert _dry_run("tail.sh", *SLICE, *flags) == [expected]


def test_stop_and_delete_dry_run():
  assert _dry_run("stop.sh", *SLICE) == [
    (
      f"{SSH} --worker=all --command='pid=$(cat ~/bert_jax_run.pid) && if kill -TERM $pid"
      " 2> /dev/null; then while kill -0 $pid 2> /dev/null; do sleep 1; done; fi'"
    )
  ]
  assert _dry_run("delete.sh", *SLICE) == [
    ("gcloud compute tpus tpu-vm delete bert-base --zone=us-central2-b --project=my-proj --quiet")
  ]
  assert _dry_run("delete.sh", *SLICE, "--queued") == [
    (
      "gcloud compute tpus queued-resources delete bert-base --zone=us-central2-b"
      " --project=my-proj --force --quiet"
    )
  ]


@pytest.mark.parametrize(
  "script,flags",
  [
    ("create.sh", ("--accelerator=v5litepod-16", "--queued", "--spot")),
    ("create.sh", ("--accelerator=v4-32",)),
    (
      "run.sh",
      (
        "--accelerator=v4-32",
        "--config=configs/bert_base.py:arg",
        "--workdir=gs://b/it's here",
        '--config.data.corpus_paths=("a b.txt",)',
      ),
    ),
    ("tail.sh", ("--follow",)),
    ("stop.sh", ()),
    ("delete.sh", ("--queued",)),
  ],
)
def test_printed_commands_are_the_commands_run(fake_gcloud, script, flags):
  env, log = fake_gcloud
  lines = _dry_run(script, *SLICE, *flags, env=env)
  result = _launch(script, *SLICE, *flags, env=env)
  assert result.returncode == 0, result.stderr
  assert _gcloud_calls(log) == _as_argv(lines)
  assert result.stderr.splitlines() == [f"+ {line}" for line in lines]  # The command echo.


@pytest.mark.parametrize(
  "script,flags,message",
  [
    (
      "create.sh",
      ("--zone=us-central2-b", "--project=p", "--accelerator=v4-32"),
      "error: missing --name=TPU_NAME",
    ),
    ("create.sh", ("--name=a", "--project=p", "--accelerator=v4-32"), "error: missing --zone="),
    (
      "create.sh",
      ("--name=a", "--zone=us-central2-b", "--accelerator=v4-32"),
      "error: missing --project=",
    ),
    ("create.sh", (*SLICE,), "error: missing --accelerator=TYPE"),
    (
      "create.sh",
      (*SLICE, "--accelerator=v5e-16"),
      (
        "error: unknown accelerator type 'v5e-16'; use v4-N or v5p-N (N TensorCores, a multiple of"
        " 8), v5litepod-N (v5e) or v6e-N (N chips: 1, 4, 8, 16, 32, 64, 128 or 256)"
      ),
    ),
    ("create.sh", (*SLICE, "--accelerator=v3-8"), "error: unknown accelerator type 'v3-8'"),
    ("create.sh", (*SLICE, "--accelerator=v4-12"), "error: unknown accelerator type 'v4-12'"),
    ("create.sh", (*SLICE, "--accelerator=v6e-12"), "error: unknown accelerator type 'v6e-12'"),
    (
      "create.sh",
      (*SLICE, "--accelerator=v4-32", "--spot", "--reserved"),
      "error: --spot and --reserved exclude each other",
    ),
    ("create.sh", (*SLICE, "--accelerator", "v4-32"), "error: unknown flag '--accelerator'"),
    (
      "create.sh",
      ("--name=Bert_Base", "--zone=us-central2-b", "--project=p", "--accelerator=v4-32"),
      "error: bad --name='Bert_Base'",
    ),
    (
      "create.sh",
      ("--name=a", "--zone=central", "--project=p", "--accelerator=v4-32"),
      "error: bad --zone='central'",
    ),
    (
      "run.sh",
      (*SLICE, "--accelerator=v4-32", "--config=configs/bert_base.py", "--workdir=/tmp/base"),
      (
        "error: --workdir='/tmp/base' must be a gs:// path on v4-32 (16 chips on several hosts"
        " that must share one workdir), e.g. --workdir=gs://BUCKET/bert-base"
      ),
    ),
    (
      "run.sh",
      (*SLICE, "--accelerator=v5litepod-16", "--config=configs/bert_base.py", "--workdir=base"),
      "error: --workdir='base' must be a gs:// path on v5litepod-16",
    ),
    ("run.sh", (*SLICE, "--accelerator=v4-32", "--workdir=gs://b/x"), "error: missing --config="),
    (
      "run.sh",
      (*SLICE, "--accelerator=v4-32", "--config=configs/bert_base", "--workdir=gs://b/x"),
      "error: bad --config='configs/bert_base'",
    ),
    (
      "run.sh",
      (*SLICE, "--config=configs/bert_base.py", "--workdir=gs://b/x"),
      "error: missing --accelerator=TYPE",
    ),
    ("setup.sh", (*SLICE, "--ref=v1"), "error: --ref needs --git=URL"),
    ("setup.sh", (*SLICE, "--source=/nonexistent"), "error: --source='/nonexistent' is not a"),
    ("setup.sh", (*SLICE, "--python=python"), "error: bad --python='python'"),
    (
      "setup.sh",
      (*SLICE, "--source=.", "--git=https://x/y.git"),
      "error: --source and --git exclude each other",
    ),
    ("tail.sh", (*SLICE, "--worker=last"), "error: bad --worker='last'"),
    ("local.sh", (), "error: missing --workdir=DIR"),
    ("local.sh", ("--workdir=/tmp/x", "--num-processes=0"), "error: bad --num-processes='0'"),
    ("local.sh", ("--workdir=/tmp/x", "--port=70000"), "error: bad --port='70000'"),
    ("local.sh", ("--workdir=/tmp/x", "--name=a"), "error: unknown flag '--name=a'"),
    ("gpu_benchmark.sh", ("--runs=base,medium",), "error: bad --runs='base,medium'"),
    ("gpu_benchmark.sh", ("--steps=0",), "error: bad --steps='0'"),
    ("gpu_benchmark.sh", ("--wheels=/nonexistent",), "error: bad --wheels='/nonexistent'"),
  ],
)
def test_bad_input_is_one_line_and_exit_2(script, flags, message):
  result = _launch(script, *flags, "--dry-run")
  assert (result.returncode, result.stdout) == (2, "")
  assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(message), result.stderr


def _remote(line):
  """The command a printed `gcloud ... ssh ... --command=...` line runs on every worker."""
  word = shlex.split(line)[-1]
  assert word.startswith("--command=")
  return word.removeprefix("--command=")


def test_remote_commands_start_tail_and_stop_the_trainer(tmp_path):
  """Runs what run.sh / tail.sh / stop.sh send to a worker in a local shell, with HOME holding
  a stand-in trainer that logs its arguments and takes 0.5 s to "checkpoint" on SIGTERM."""
  home = tmp_path / "home"
  (home / "bert_jax").mkdir(parents=True)
  trainer = home / "bert_jax_venv" / "bin" / "python"
  trainer.parent.mkdir(parents=True)
  trainer.write_text(f"""#!{sys.executable}
import json, os, signal, sys, time
def checkpoint_and_exit(*_):
  time.sleep(0.5)
  print("saved; exiting", flush=True)
  sys.exit(0)
signal.signal(signal.SIGTERM, checkpoint_and_exit)
print("started", json.dumps(sys.argv[1:]), "in", os.getcwd(), flush=True)
time.sleep(60)
""")
  trainer.chmod(0o755)
  (run_line,) = _dry_run(
    "run.sh",
    *SLICE,
    "--accelerator=v4-32",
    "--config=configs/bert_base.py",
    "--workdir=gs://b/base",
    "--config.data.tfrecord_pattern=gs://b/train-*",
  )
  (tail_line,) = _dry_run("tail.sh", *SLICE)
  (stop_line,) = _dry_run("stop.sh", *SLICE)
  log, pid_file = home / "bert_jax_run.log", home / "bert_jax_run.pid"
  started = (
    "started "
    + json.dumps(
      [
        "-m",
        "bert_jax.main",
        "--config=configs/bert_base.py",
        "--workdir=gs://b/base",
        "--config.data.tfrecord_pattern=gs://b/train-*",
      ]
    )
    + f" in {home / 'bert_jax'}"
  )
  wait_started = "until grep -q started ~/bert_jax_run.log; do sleep 0.05; done"

  def shell(command):
    return subprocess.run(
      ["bash", "-c", command],
      env=dict(os.environ, HOME=str(home)),
      cwd=tmp_path,
      capture_output=True,
      text=True,
      timeout=30,
      check=True,
    )

  # run.sh's command returns at once (an ssh session can end) and leaves the trainer running.
  shell(_remote(run_line))
  pid = int(pid_file.read_text())
  try:
    shell(wait_started)
    os.kill(pid, 0)
    assert log.read_text().splitlines() == [started]
    assert shell(_remote(tail_line)).stdout.splitlines() == [started]
  finally:
    os.kill(pid, signal.SIGKILL)

  # stop.sh's command returns only once the trainer has saved and exited. (One shell starts and
  # stops it, so that shell reaps it: kill -0 would still see an unreaped zombie.)
  log.unlink()
  shell(f"{_remote(run_line)} && {wait_started} && {_remote(stop_line)}")
  assert log.read_text().splitlines() == [started, "saved; exiting"]


def test_local_dry_run():
  lines = _dry_run(
    "local.sh", "--workdir=/tmp/two", "--num-processes=2", "--config.num_train_steps=4"
  )
  assert lines == [
    "env XLA_FLAGS=--xla_force_host_platform_device_count=2 JAX_PLATFORMS=cpu python -m"
    " bert_jax.main --config=configs/bert_tiny.py --workdir=/tmp/two"
    f" --coordinator_address=127.0.0.1:12355 --num_processes=2 --process_id={i}"
    " --config.num_train_steps=4 &"
    for i in range(2)
  ] + ["wait"]


def test_gpu_benchmark_dry_run_is_the_gpu_table():
  common = "--config.model.dtype=bfloat16 --steps=20 --rounds=4 --baseline=hf_torch"
  tool = "python3 -m bert_jax.bench.benchmark"
  base = f"{tool} --config=configs/bert_base.py --config.global_batch_size=256 {common}"
  large = f"{tool} --config=configs/bert_large.py --config.global_batch_size=128 {common}"
  out = ">> /tmp/gpu/gpu_benchmark.jsonl"
  assert _dry_run("gpu_benchmark.sh", "--out=/tmp/gpu") == [
    f"{base} {out}",
    f"{base} --torch_compile {out}",
    f"{large} {out}",
  ]
  assert _dry_run(
    "gpu_benchmark.sh", "--out=/tmp/gpu", "--runs=large", "--steps=8", "--config.model.num_layers=1"
  ) == [f"{large.replace('--steps=20', '--steps=8')} --config.model.num_layers=1 {out}"]
  table = "python3 -m bert_jax.bench.profile_table --trace_dir=/tmp/gpu/trace_base --steps=3"
  assert _dry_run("gpu_benchmark.sh", "--out=/tmp/gpu", "--runs=base", "--profile") == [
    f"{base} --profile_dir=/tmp/gpu/trace_base --profile_steps=3 {out}",
    f"{table} --top=40 > /tmp/gpu/base.profile.jsonl",
  ]
  tests = (
    "env JAX_PLATFORMS=cuda,cpu python3 -m pytest -q -p no:cacheprovider --tb=short -rs"
    " tests/test_cudnn_attention.py tests/test_flash_attention.py"
    " tests/test_layer_norm_kernels.py > /tmp/gpu/gpu_tests.txt"
  )
  kernels = (
    "env XLA_FLAGS=--xla_gpu_enable_command_buffer= python3 -m"
    " bert_jax.bench.benchmark_gpu_attention --flash_launch=128/4/64/4/2"
    " --flash_launch=128/8/64/8/2 --flash_launch=128/8/64/4/3 --flash_launch=64/4/64/4/2"
    " --flash_launch=128/8/32/4/2 > /tmp/gpu/gpu_attention.jsonl"
  )
  norms = (
    "python3 -m bert_jax.bench.benchmark_gpu_layer_norm --norm_launch=1/4/4/64/4"
    " --norm_launch=8/8/8/64/8 --norm_launch=2/4/2/32/4 --norm_launch=4/8/4/128/8"
    " --norm_launch=4/4/8/256/8"
    " > /tmp/gpu/gpu_layer_norm.jsonl"
  )
  assert _dry_run("gpu_benchmark.sh", "--out=/tmp/gpu", "--runs=large", "--gpu_tests") == [
    tests,
    kernels,
    norms,
    f"{large} {out}",
  ]
  # Dense against flash attention, side by side at seq 512; the variants tool prints its own
  # profile table, so --profile adds no profile_table command.
  variants = (
    "python3 -m bert_jax.bench.benchmark_variants --config=configs/bert_base.py"
    " --config.global_batch_size=64 --config.data.max_seq_length=512"
    " --config.data.max_predictions_per_seq=80 --config.model.dtype=bfloat16 --steps=20"
    " --rounds=4 --variant=dense:model.attention_kind=dense"
    " --variant=flash:model.attention_kind=flash"
  )
  assert _dry_run("gpu_benchmark.sh", "--out=/tmp/gpu", "--runs=attention512", "--profile") == [
    f"{variants} --profile_dir=/tmp/gpu/trace_attention512 --profile_steps=3 {out}"
  ]
  # The GPU step's cuBLAS GEMMs against XLA's Triton ones.
  assert _dry_run("gpu_benchmark.sh", "--out=/tmp/gpu", "--runs=gemms") == [
    "python3 -m bert_jax.bench.benchmark_variants --config=configs/bert_base.py"
    " --config.global_batch_size=256 --config.model.dtype=bfloat16 --steps=20 --rounds=4"
    f" --variant=default --variant=triton_gemm:xla.xla_gpu_enable_triton_gemm=true {out}"
  ]
  # The step as compiled against other ways of running its layer norms.
  assert _dry_run("gpu_benchmark.sh", "--out=/tmp/gpu", "--runs=fusions") == [
    "python3 -m bert_jax.bench.benchmark_variants --config=configs/bert_base.py"
    " --config.global_batch_size=256 --config.model.dtype=bfloat16 --steps=20 --rounds=4"
    " --variant=default --variant=cudnn_norm:xla.xla_gpu_enable_cudnn_layer_norm=true"
    " --variant=block_level:xla.xla_gpu_experimental_enable_fusion_block_level_rewriter=true"
    f" --variant=triton_norm:model.layer_norm_kind=triton {out}"
  ]


def _fake_python(tmp_path):
  """Stands in for python: records its arguments and XLA_FLAGS. With STUB_FAIL_ID set, the
  others get ready to record a SIGTERM and wait to be stopped; that process, once they are
  ready, exits with status 3."""
  stub = tmp_path / "python"
  stub.write_text(f"""#!{sys.executable}
import json, os, pathlib, signal, sys, time
out = pathlib.Path({str(tmp_path)!r})
flags = dict(a[2:].split("=", 1) for a in sys.argv if a.startswith("--") and "=" in a)
index, count = int(flags["process_id"]), int(flags["num_processes"])
(out / f"argv_{{index}}.json").write_text(json.dumps([sys.argv[1:], os.environ["XLA_FLAGS"]]))
if "STUB_FAIL_ID" in os.environ:
  if index == int(os.environ["STUB_FAIL_ID"]):
    while len(list(out.glob("ready_*"))) < count - 1:
      time.sleep(0.01)
    sys.exit(3)
  def stopped(*_):
    (out / f"stopped_{{index}}").write_text("")
    sys.exit(0)
  signal.signal(signal.SIGTERM, stopped)
  (out / f"ready_{{index}}").write_text("")
  time.sleep(60)
""")
  stub.chmod(0o755)
  return stub


def test_local_runs_every_process_as_printed(tmp_path):
  stub = _fake_python(tmp_path)
  flags = (
    "--workdir=/tmp/three",
    "--num-processes=3",
    "--devices-per-process=4",
    "--port=23456",
    f"--python={stub}",
    "--config.global_batch_size=12",
  )
  lines = _dry_run("local.sh", *flags)
  result = _launch("local.sh", *flags)
  assert result.returncode == 0, result.stderr
  for i, line in enumerate(lines[:3]):
    words = shlex.split(line)
    assert (
      words[:4]
      == [
        "env",
        "XLA_FLAGS=--xla_force_host_platform_device_count=4",
        "JAX_PLATFORMS=cpu",
        str(stub),
      ]
      and words[-1] == "&"
    )
    argv, xla_flags = json.loads((tmp_path / f"argv_{i}.json").read_text())
    assert argv == words[4:-1] and xla_flags == "--xla_force_host_platform_device_count=4"


@pytest.mark.parametrize("num_processes,failing", [(2, 1), (3, 0)])
def test_local_stops_the_others_when_one_fails(tmp_path, num_processes, failing):
  stub = _fake_python(tmp_path)
  start = time.monotonic()
  result = _launch(
    "local.sh",
    "--workdir=/tmp/x",
    f"--num-processes={num_processes}",
    f"--python={stub}",
    env=dict(os.environ, STUB_FAIL_ID=str(failing)),
  )
  assert result.returncode == 3
  assert result.stderr.splitlines()[-1].endswith("exited with status 3; stopping the others")
  others = [tmp_path / f"stopped_{i}" for i in range(num_processes) if i != failing]
  deadline = time.monotonic() + 10
  while not all(p.exists() for p in others) and time.monotonic() < deadline:
    time.sleep(0.05)
  assert all(p.exists() for p in others)
  assert time.monotonic() - start < 30  # Not the 60 s the others would otherwise wait.


def test_scripts_pass_shellcheck():
  scripts = sorted(str(p.relative_to(REPO)) for p in LAUNCH.glob("*.sh"))
  assert {
    f"launch/{name}.sh"
    for name in ("common", "create", "setup", "run", "tail", "stop", "delete", "local")
  } <= set(scripts)
  result = shellcheck_run.shellcheck(scripts)
  assert result.returncode == 0, result.stdout
