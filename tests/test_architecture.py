"""The architecture linter and the formatter/linter run as tests, so CI enforces them."""

import ast
import pathlib
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(sys.executable).parent


def _run(tool, *args, cwd=REPO, env=None):
  executable = BIN / tool
  assert executable.exists(), f"{tool} is not installed: pip install -e '.[test]'"
  return subprocess.run(
    [str(executable), *args],
    cwd=cwd,
    capture_output=True,
    text=True,
    check=False,
    env=env,
    timeout=300,
  )


def test_import_contracts_hold():
  result = _run("lint-imports", "--no-cache")
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  assert "0 broken" in result.stdout, result.stdout[-3000:]


def test_a_back_import_breaks_the_layers(tmp_path):
  """A copy of the package with one import pointing up (data -> tools) fails the contract."""
  shutil.copytree(
    REPO / "bert_jax", tmp_path / "bert_jax", ignore=shutil.ignore_patterns("__pycache__", "corpus")
  )
  shutil.copy(REPO / "setup.cfg", tmp_path / "setup.cfg")
  files = tmp_path / "bert_jax" / "data" / "files.py"
  files.write_text(files.read_text() + "\nfrom bert_jax.tools import cli  # A back arrow.\n")
  result = _run(
    "lint-imports", "--no-cache", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": str(BIN)}
  )
  assert result.returncode != 0, result.stdout[-3000:]
  assert "bert_jax.data.files -> bert_jax.tools.cli" in result.stdout


def _imported_modules(path):
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.Import):
      yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      yield node.module


def test_library_never_imports_tools():
  """Belt and braces for the layers contract: no library module imports a command-line tool."""
  offenders = [
    str(p.relative_to(REPO))
    for p in (REPO / "bert_jax").rglob("*.py")
    if "tools" not in p.relative_to(REPO).parts
    and p.name != "main.py"
    and any(m.startswith("bert_jax.tools") for m in _imported_modules(p))
  ]
  assert not offenders


def test_tree_is_formatted_and_lint_clean():
  paths = ["bert_jax", "tests", "configs", "launch"]
  check = _run("ruff", "check", *paths)
  assert check.returncode == 0, check.stdout[-3000:]
  formatted = _run("ruff", "format", "--check", *paths)
  assert formatted.returncode == 0, formatted.stdout[-3000:]
