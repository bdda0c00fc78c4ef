"""The train loop end to end: metrics, TensorBoard, resume, NaN stop, 2 processes (preemption:
test_preemption.py)."""

import numpy as np
import pytest
import tensorflow as tf

from tests import run_helpers


def test_trains_logs_and_resumes(tmp_path):
  first = run_helpers.run_main(
    tmp_path,
    run_helpers.quick_flags(
      tmp_path, num_train_steps=12, eval_every_steps=12, **{"optimizer.learning_rate": 3e-3}
    ),
  )
  assert first.returncode == 0, first.stderr[-3000:]
  rows = run_helpers.read_metrics(tmp_path)
  assert [r["step"] for r in rows] == list(range(1, 13))
  assert rows[-1]["mlm_loss"] < rows[0]["mlm_loss"] - 0.5  # It learns.
  for key in (
    "loss",
    "mlm_loss",
    "mlm_accuracy",
    "nsp_accuracy",
    "learning_rate",
    "grad_norm",
    "tokens_per_sec",
    "steps_per_sec",
    "mfu",
  ):
    assert np.isfinite(rows[-1][key]), key
  assert run_helpers.read_metrics(tmp_path, "eval")[-1]["step"] == 12
  assert run_helpers.checkpoint_steps(tmp_path) == [4, 8, 12]
  # TensorBoard has the same numbers as metrics.jsonl.
  events = list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
  logged = {}
  for event in tf.compat.v1.train.summary_iterator(str(events[0])):
    for value in event.summary.value:
      logged[(value.tag, event.step)] = float(tf.make_ndarray(value.tensor))
  assert logged[("train/mlm_loss", 12)] == pytest.approx(rows[-1]["mlm_loss"], rel=1e-6)
  # Running again with more steps resumes at step 12 instead of starting over.
  second = run_helpers.run_main(tmp_path, run_helpers.quick_flags(tmp_path, num_train_steps=14))
  assert second.returncode == 0, second.stderr[-3000:]
  assert "Resuming from" in second.stderr
  steps = [r["step"] for r in run_helpers.read_metrics(tmp_path)]
  assert steps == list(range(1, 15))


def test_nonfinite_loss_stops_naming_the_step_and_keeps_the_last_good_checkpoint(tmp_path):
  # A huge learning rate blows the params up after the first update.
  flags = run_helpers.quick_flags(
    tmp_path,
    num_train_steps=8,
    checkpoint_every_steps=1,
    **{"optimizer.learning_rate": 1e30, "optimizer.warmup_steps": 0},
  )
  result = run_helpers.run_main(tmp_path, flags)
  assert result.returncode != 0
  message = result.stderr.strip().splitlines()[-1]
  assert "not finite at step" in message, result.stderr[-3000:]
  bad_step = int(message.split("not finite at step ")[1].split(";")[0])
  assert run_helpers.checkpoint_steps(tmp_path)[-1] == bad_step - 1
  assert f"checkpoints/{bad_step - 1}" in message


def test_two_processes_give_the_same_losses_as_one(tmp_path):
  """Two tasks started the way srun starts them (its variables, no coordinator flags) join one
  run of 4 devices; its checkpoint resumes in one process on one device. (Open MPI's variables
  join the two-process run of test_recurrent_training.py.)"""
  flags = run_helpers.quick_flags(tmp_path, num_train_steps=4, checkpoint_every_steps=4)
  single = run_helpers.run_main(tmp_path / "one", flags, devices=4)
  assert single.returncode == 0, single.stderr[-3000:]
  run = run_helpers.run_two_processes(tmp_path / "two", flags, launcher="slurm")
  assert run.codes == [0, 0], run.errors
  for i, stderr in enumerate(run.stderr):
    assert "SLURM (srun), coordinator localhost:" in stderr, stderr[-3000:]
    assert f"; process {i} of 2; 2 local / 4 global devices (cpu)" in stderr
  one = run_helpers.read_metrics(tmp_path / "one")
  two = run_helpers.read_metrics(tmp_path / "two")
  assert [r["step"] for r in two] == [1, 2, 3, 4]
  for a, b in zip(one, two):
    for key in ("loss", "mlm_loss", "nsp_loss", "grad_norm"):
      assert b[key] == pytest.approx(a[key], rel=1e-5), (key, a["step"])
  np.testing.assert_allclose(
    run_helpers.restore_params(tmp_path / "two", 4)["bert/pooler/kernel"],
    run_helpers.restore_params(tmp_path / "one", 4)["bert/pooler/kernel"],
    rtol=1e-5,
    atol=1e-6,
  )
  more = run_helpers.quick_flags(tmp_path, num_train_steps=5, checkpoint_every_steps=4)
  resumed = run_helpers.run_main(tmp_path / "two", more, devices=1)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "Resuming from" in resumed.stderr
  assert "one process; process 0 of 1; 1 local / 1 global devices" in resumed.stderr
  rows = run_helpers.read_metrics(tmp_path / "two")
  assert [r["step"] for r in rows] == [1, 2, 3, 4, 5] and np.isfinite(rows[-1]["loss"])
