"""Running `bert_jax.main` as a real subprocess, the way users and TPU workers run it."""

import json
import os
import pathlib
import socket
import subprocess
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp

from tests import xla_options

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


def main_command(workdir, extra_flags=(), config="configs/bert_tiny.py"):
  return [
    sys.executable,
    "-m",
    "bert_jax.main",
    f"--config={REPO / config}",
    f"--workdir={workdir}",
    *extra_flags,
  ]


# The children run a few steps of tiny models, where XLA:CPU's LLVM optimisation costs far more
# than it saves: at level 0 their programs compile 2-3x faster (the same metrics to 4 digits
# in a 200-step ELECTRA run; pure compute runs ~2x slower, so not for the long learning tests).
# The options of the unoptimised compiles in process (tests/xla_options.py: the older loop
# emitters) take a small bert_tiny run 14-16 s -> 12.6-13.4 s, with the same metrics.
CHILD_XLA_FLAGS = "--xla_backend_optimization_level=0 " + xla_options.as_xla_flags(
  xla_options.UNOPTIMIZED_CPU_OPTIONS
)


def env(devices=1, **extra):
  environment = dict(os.environ)
  environment.update(
    XLA_FLAGS=f"--xla_force_host_platform_device_count={devices} {CHILD_XLA_FLAGS}",
    JAX_PLATFORMS="cpu",
    TF_CPP_MIN_LOG_LEVEL="2",
    **extra,
  )
  return environment


def run_main(workdir, extra_flags=(), devices=1, timeout=300, config="configs/bert_tiny.py"):
  return subprocess.run(
    main_command(workdir, extra_flags, config),
    env=env(devices),
    cwd=REPO,
    capture_output=True,
    text=True,
    timeout=timeout,
    check=False,
  )


def run_two_processes(workdir, extra_flags=(), timeout=300, config="configs/bert_tiny.py"):
  """`bert_jax.main` as two processes on localhost (2 fake devices each), as a pod's hosts run.

  Returns:
    (the two return codes, the tail of both processes' stderr for a failure message).
  """
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  processes = [
    subprocess.Popen(
      main_command(
        workdir,
        [
          *extra_flags,
          f"--coordinator_address=127.0.0.1:{port}",
          "--num_processes=2",
          f"--process_id={i}",
        ],
        config,
      ),
      env=env(devices=2),
      cwd=REPO,
      stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE,
      text=True,
    )
    for i in range(2)
  ]
  try:
    errors = [p.communicate(timeout=timeout)[1] for p in processes]
  finally:
    for p in processes:
      p.kill()
  return [p.returncode for p in processes], errors[0][-3000:] + errors[1][-3000:]


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
