"""Damaged checkpoints: a restart resumes from the newest one that restores, the damaged ones
are kept aside, and a workdir where none restores stops with one line instead of starting over."""

import hashlib
import os
import shutil

import numpy as np
import pytest

from bert_jax import main
from bert_jax.errors import UserInputError
from bert_jax.train import loop
from tests import helpers, run_helpers

_STEPS, _EVERY = 16, 4


def _config(small_corpus_keys):
  return helpers.small_config(
    num_train_steps=_STEPS,
    checkpoint_every_steps=_EVERY,
    eval_every_steps=_STEPS,
    max_checkpoints_to_keep=10,
    compilation_cache_dir="",  # jax's cache settings are process-wide; leave pytest's alone.
    **{"data.num_eval_examples": 8, **small_corpus_keys},
  )


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, small_corpus_keys):
  workdir = tmp_path_factory.mktemp("uninterrupted")
  loop.train_and_evaluate(_config(small_corpus_keys), str(workdir))
  assert run_helpers.checkpoint_steps(workdir) == [4, 8, 12, 16]
  return workdir


def _digest(directory):
  """{relative path: sha256} of every file under ``directory``."""
  return {
    str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
    for p in sorted(directory.rglob("*"))
    if p.is_file()
  }


def _truncate_largest_array_file(step_dir):
  arrays = [p for p in (step_dir / "state").rglob("d/*") if p.is_file()]
  largest = max(arrays, key=lambda p: p.stat().st_size)
  os.truncate(largest, largest.stat().st_size // 2)


def _remove_metadata(step_dir):
  (step_dir / "state" / "_METADATA").unlink()


def _empty(step_dir):
  for child in step_dir.iterdir():
    shutil.rmtree(child) if child.is_dir() else child.unlink()


DAMAGE = {16: _truncate_largest_array_file, 12: _remove_metadata, 8: _empty}


def test_each_kind_of_damage_is_set_aside_and_the_run_ends_as_if_uninterrupted(
  uninterrupted, small_corpus_keys, tmp_path, caplog
):
  workdir = tmp_path / "damaged"
  shutil.copytree(uninterrupted, workdir)
  for step, damage in DAMAGE.items():
    damage(workdir / "checkpoints" / str(step))
  damaged = {step: _digest(workdir / "checkpoints" / str(step)) for step in DAMAGE}

  loop.train_and_evaluate(_config(small_corpus_keys), str(workdir))

  for step in DAMAGE:  # Each warned with its step and reason, kept aside byte for byte.
    assert f"Checkpoint step {step} is damaged (" in caplog.text
    assert _digest(workdir / "checkpoints.damaged" / str(step)) == damaged[step]
  assert caplog.text.count("resuming from step 4") == len(DAMAGE)
  assert run_helpers.checkpoint_steps(workdir) == [4, 8, 12, 16]
  expected = run_helpers.restore_params(uninterrupted, _STEPS)
  actual = run_helpers.restore_params(workdir, _STEPS)
  assert expected.keys() == actual.keys()
  for name in expected:  # Same program, data and rng from step 4 on: bitwise equal.
    np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def test_when_none_restores_the_run_stops_with_one_line_and_moves_nothing(
  uninterrupted, small_corpus_keys, tmp_path, capsys
):
  workdir = tmp_path / "all_damaged"
  shutil.copytree(uninterrupted, workdir)
  for step in run_helpers.checkpoint_steps(workdir):
    _remove_metadata(workdir / "checkpoints" / str(step))
  before = _digest(workdir / "checkpoints")

  with pytest.raises(UserInputError, match=r"none of the 4 checkpoints .* restores \(newest, 16:"):
    loop.train_and_evaluate(_config(small_corpus_keys), str(workdir))
  argv = ["main", f"--workdir={workdir}", f"--config={run_helpers.REPO}/configs/bert_tiny.py"]
  argv += run_helpers.small_flags(
    num_train_steps=_STEPS, checkpoint_every_steps=_EVERY, **small_corpus_keys
  )
  argv += ["--config.compilation_cache_dir=", "--config.model.num_heads=4"]
  assert main.run(argv) == 2
  line = capsys.readouterr().err.strip().splitlines()[-1]
  assert line.startswith("error: none of the 4 checkpoints") and len(line) < 300, line

  assert _digest(workdir / "checkpoints") == before
  assert not (workdir / "checkpoints.damaged").exists()
