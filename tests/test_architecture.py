"""The architecture linter and the formatter/linter run as tests, so CI enforces them."""

import ast
import pathlib
import shutil
import subprocess
import sys

from bert_jax import names

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


# The family-name constants of `bert_jax.names` (and the derived group of recurrent families).
_FAMILY_CONSTANTS = {"BERT", "ALBERT", "DISTILBERT", "ELECTRA", "XLNET", "TRANSFORMER_XL"}
_FAMILY_GROUPS = {"RECURRENT_FAMILIES"}
# The family modules under models/ (and models/interop/) that only the registry imports.
_FAMILY_MODULES = (
  "albert",
  "bert",
  "distilbert",
  "electra",
  "electra_config",
  "xlnet",
  "xlnet_layers",
  "transformer_xl",
  "transformer_xl_layers",
  "permutation",
)


def _family_mentions(path):
  """Family-name constants a module uses, family modules it imports, and comparisons of a
  value with a family's name literal (``family == "electra"``): each a branch on a family."""
  values = {getattr(names, c) for c in _FAMILY_CONSTANTS}
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
      if node.value.id == "names" and node.attr in _FAMILY_CONSTANTS | _FAMILY_GROUPS:
        yield f"names.{node.attr}"
    elif isinstance(node, ast.ImportFrom) and node.module == "bert_jax.names":
      yield from (a.name for a in node.names if a.name in _FAMILY_CONSTANTS | _FAMILY_GROUPS)
    elif isinstance(node, ast.ImportFrom) and node.module:
      imported = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
      yield from (m for m in imported if m.startswith("bert_jax.models.") and _is_family(m))
    elif isinstance(node, ast.Import):
      yield from (a.name for a in node.names if _is_family(a.name))
    elif isinstance(node, ast.Compare):
      for side in (node.left, *node.comparators):
        # "bert" is also the trunk's parameter scope (tasks/trunk.py), compared as such.
        if isinstance(side, ast.Constant) and side.value in values - {names.BERT}:
          yield repr(side.value)


def _is_family(module: str) -> bool:
  parts = module.split(".")
  return parts[:2] == ["bert_jax", "models"] and len(parts) > 2 and parts[-1] in _FAMILY_MODULES


def test_only_the_models_layer_names_a_family():
  """The trainer, tasks, data and tools ask the registry (`models/families.py`) for a family's
  behaviour: none tests a family's name or imports a family's modules."""
  offenders = {
    str(p.relative_to(REPO)): sorted(set(_family_mentions(p)))
    for p in (REPO / "bert_jax").rglob("*.py")
    if "models" not in p.relative_to(REPO).parts and p.name != "names.py"
  }
  assert {p: m for p, m in offenders.items() if m} == {}


def test_the_family_check_sees_a_branch(tmp_path):
  """A module that branches on a family's name is reported by the check above."""
  module = tmp_path / "branch.py"
  module.write_text(
    "from bert_jax import names\nfrom bert_jax.models.albert import AlbertEncoder\n"
    "def f(c):\n  return c.family == names.XLNET or c.family in ('x',) or c.family == 'electra'\n"
  )
  assert sorted(_family_mentions(module)) == [
    "'electra'",
    "bert_jax.models.albert",
    "names.XLNET",
  ]
