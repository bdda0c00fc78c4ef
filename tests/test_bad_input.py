"""Bad input to `bert_jax.main`: a one-line error naming problem and fix, non-zero exit, and
nothing in the workdir overwritten.

The refused runs are in-process (`main.run` returns the status that `python -m bert_jax.main`
exits with); one real process checks that a refused run's exit status is non-zero."""

import sys
from typing import NamedTuple

import jax
import pytest

from bert_jax import main
from tests import run_helpers

# Keep jax's process-wide compilation cache settings alone (main would point them at a workdir).
_NO_CACHE = "--config.compilation_cache_dir="


class _Result(NamedTuple):
  returncode: int
  stderr: str


def _run(capsys, workdir, flags):
  """`bert_jax.main` on configs/bert_tiny.py in this process: its status and stderr."""
  sys.modules.pop("config_config", None)  # config_flags re-executes config files into it.
  capsys.readouterr()
  status = main.run(run_helpers.main_command(workdir, [*flags, _NO_CACHE])[2:])
  return _Result(status, capsys.readouterr().err)


def _error_line(result):
  lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
  return lines[-1] if lines else ""


@pytest.mark.parametrize(
  "flags,expected",
  [
    (["--config.data.corpus_paths=('/nonexistent/wiki.txt',)"], "/nonexistent/wiki.txt"),
    (["--config.data.vocab_path=/nonexistent/vocab.txt"], "/nonexistent/vocab.txt"),
    (["--config.model.vocab_size=30522"], "has 8192 entries but model.vocab_size is 30522"),
    (["--config.model.num_heads=3"], "hidden_size=128 is not divisible by model.num_heads=3"),
    (
      ["--config.data.max_seq_length=256"],
      "max_seq_length=256 exceeds model.max_position_embeddings=128",
    ),
    (["--config.mesh.data=3"], f"does not divide the {jax.device_count()} devices"),
  ],
  ids=["missing_corpus", "missing_vocab", "vocab_size", "heads", "seq_len", "mesh"],
)
def test_bad_config_values_fail_with_one_line(tmp_path, capsys, flags, expected):
  result = _run(capsys, tmp_path, flags)
  assert result.returncode == 2, result.stderr[-2000:]
  line = _error_line(result)
  assert line.startswith("error: ") and expected in line, result.stderr[-2000:]
  assert not (tmp_path / "checkpoints").exists() or not any((tmp_path / "checkpoints").iterdir())


def test_unknown_config_key_is_refused(tmp_path):
  result = run_helpers.run_main(tmp_path, ["--config.model.hiden_size=64"])
  assert result.returncode != 0
  assert "hiden_size" in result.stderr


def _snapshot(directory):
  return {p: p.stat().st_mtime_ns for p in directory.rglob("*") if p.is_file()}


def test_workdir_of_another_model_is_refused_and_kept(tmp_path, capsys):
  # The run to refuse trains in a child on one device (in this process it would compile for
  # the 8 fake devices); the refusals happen before anything compiles.
  first = run_helpers.run_main(
    tmp_path / "run", run_helpers.quick_flags(tmp_path, num_train_steps=2, checkpoint_every_steps=2)
  )
  assert first.returncode == 0, first.stderr[-2000:]
  workdir = tmp_path / "run"
  before = _snapshot(workdir)
  wider = run_helpers.quick_flags(
    tmp_path, num_train_steps=4, **{"model.hidden_size": 64, "model.intermediate_size": 256}
  )
  result = _run(capsys, workdir, wider)
  assert result.returncode == 2
  assert "model.hidden_size=128 but the config says 64" in _error_line(result)
  assert _snapshot(workdir) == before
  # Without config.json the checkpoint's own shapes still refuse the other model.
  (workdir / "config.json").unlink()
  result = _run(capsys, workdir, wider)
  assert result.returncode == 2
  line = _error_line(result)
  assert "checkpoints/2 holds params/" in line and "written by another model" in line, line
  assert {p: t for p, t in _snapshot(workdir).items() if p.name != "config.json"} == {
    p: t for p, t in before.items() if p.name != "config.json"
  }


def test_a_line_with_long_paths_keeps_its_problem_and_fix():
  """Deep temporary or bucket paths lose their middle before the message loses its end."""
  from bert_jax.cli import error_lines
  from bert_jax.errors import UserInputError

  deep = "/tmp/" + "/".join(f"level_{i:02d}_of_a_deep_directory" for i in range(6)) + "/model.bin"
  line, status = error_lines.describe(
    UserInputError(f"{deep} + {deep}: the table differs from the other's; convert them together")
  )
  assert status == 2 and len(line) <= error_lines.MAX_LINE_CHARS
  assert line.endswith("the table differs from the other's; convert them together"), line
  assert line.startswith("error: /tmp/level_00_of...") and "directory/model.bin + " in line
