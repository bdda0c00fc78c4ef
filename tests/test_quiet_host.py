"""A host without an accelerator starts quietly with the tpu and cuda extras installed.

README's test command installs libtpu and jax's CUDA plugin; on a CPU host, without
`JAX_PLATFORMS`, jax would initialise both and print libtpu's start-up errors (and, when two
runs start at once, advice to delete its lockfile) and a CUDA traceback. Every command first
limits jax to the platforms the host has (`environment.limit_jax_to_present_platforms`).
"""

import os
import re
import subprocess

from tests import run_helpers

# Lines seen from libtpu and the CUDA plugin on a CPU host when jax initialises them.
NOISE = (
  "TPU",
  "libtpu",
  "lockfile",
  "Source Location Trace",
  "Unable to initialize backend",
  "cuDNN",
  "CUDA",
  "Traceback",
)


def test_two_tiny_runs_started_at_once_without_jax_platforms_print_no_accelerator_noise(tmp_path):
  environment = run_helpers.env()
  del environment["JAX_PLATFORMS"]
  processes = [
    subprocess.Popen(
      run_helpers.main_command(
        tmp_path / f"run{i}",
        run_helpers.quick_flags(tmp_path, num_train_steps=2, checkpoint_every_steps=2),
      ),
      env=environment,
      cwd=run_helpers.REPO,
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
    )
    for i in range(2)
  ]
  outputs = [p.communicate(timeout=300)[0] for p in processes]
  for process, output in zip(processes, outputs):
    assert process.returncode == 0, output[-3000:]
    noisy = [line for line in output.splitlines() if any(word in line for word in NOISE)]
    assert not noisy, "\n".join(noisy)
    assert re.search(r"1 local / 1 global devices \(cpu\)", output), output[-3000:]
  for i in range(2):
    assert [row["step"] for row in run_helpers.read_metrics(tmp_path / f"run{i}")] == [1, 2]


def test_a_set_jax_platforms_is_left_alone(monkeypatch):
  from bert_jax import environment

  monkeypatch.setenv("JAX_PLATFORMS", "cpu")
  assert environment.limit_jax_to_present_platforms() is None
  assert os.environ["JAX_PLATFORMS"] == "cpu"
