"""Profiler traces of chosen train steps land in <workdir>/profile and cover exactly those steps."""

import jax
import jax.numpy as jnp
import pytest

from bert_jax.errors import UserInputError
from bert_jax.train import loop, profiling
from tests import helpers


def _trace_files(workdir):
  return sorted((workdir / "profile").glob("plugins/profile/*/*.xplane.pb"))


def _host_events(trace_path):
  """(name, stats) of every host-side event in an XSpace trace file."""
  profile = jax.profiler.ProfileData.from_file(str(trace_path))
  return [
    (event.name, dict(event.stats))
    for plane in profile.planes
    if plane.name.startswith("/host:")
    for line in plane.lines
    for event in line.events
  ]


def _traced_steps(trace_path):
  return sorted(
    stats["step_num"]
    for name, stats in _host_events(trace_path)
    if name == "train" and "step_num" in stats
  )


def test_traces_exactly_the_chosen_steps(tmp_path):
  step_fn = jax.jit(lambda x: jnp.sin(x) @ x)
  for num_steps in (0, 2):
    workdir = tmp_path / f"steps_{num_steps}"
    profiler = profiling.StepProfiler(workdir, start_step=1, num_steps=num_steps)
    x = jnp.ones((16, 16))
    for step in range(5):
      profiler.before_step(step)
      x = step_fn(x)
      profiler.after_step(step, x)
    profiler.close()
    traces = _trace_files(workdir)
    if num_steps == 0:
      assert not (workdir / "profile").exists()
    else:
      assert len(traces) == 1
      assert _traced_steps(traces[0]) == [1, 2]


def test_negative_profile_settings_are_refused(tmp_path):
  with pytest.raises(UserInputError, match="profile_num_steps=-1 must be >= 0"):
    profiling.StepProfiler(tmp_path, start_step=0, num_steps=-1)


def test_bert_tiny_run_writes_a_trace_of_the_train_step(tmp_path, small_corpus_keys):
  # A fixed peak skips the MFU matmul measurement, which costs seconds on CPU.
  config = helpers.small_config(
    num_train_steps=2,
    profile_start_step=1,
    profile_num_steps=1,
    peak_flops_per_device=1e12,
    **{"data.num_eval_examples": 8, **small_corpus_keys},
  )
  loop.train_and_evaluate(config, str(tmp_path), helpers.one_device())
  traces = _trace_files(tmp_path)
  assert len(traces) == 1
  assert _traced_steps(traces[0]) == [1]
  assert any("train_step" in name for name, _ in _host_events(traces[0]))
