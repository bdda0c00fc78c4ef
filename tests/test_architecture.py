"""The architecture linter and the formatter/linter run as tests, so CI enforces them."""

import ast
import pathlib
import shutil
import subprocess
import sys

from bert_jax import names
from tests import helpers

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
  """A copy of the package with imports pointing up (data -> tools; inside models/, interop ->
  the registry) fails the contracts."""
  shutil.copytree(
    REPO / "bert_jax", tmp_path / "bert_jax", ignore=shutil.ignore_patterns("__pycache__", "corpus")
  )
  shutil.copy(REPO / "setup.cfg", tmp_path / "setup.cfg")
  files = tmp_path / "bert_jax" / "data" / "files.py"
  files.write_text(files.read_text() + "\nfrom bert_jax.tools import convert  # A back arrow.\n")
  state = tmp_path / "bert_jax" / "models" / "interop" / "hf_state.py"
  state.write_text(state.read_text() + "\nfrom bert_jax.models import families  # Up.\n")
  result = _run(
    "lint-imports", "--no-cache", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": str(BIN)}
  )
  assert result.returncode != 0, result.stdout[-3000:]
  assert "bert_jax.data.files -> bert_jax.tools.convert" in result.stdout
  assert "bert_jax.models.interop.hf_state -> bert_jax.models.families" in result.stdout


def _imported_modules(path):
  for node in ast.walk(helpers.parse_python(path)):
    if isinstance(node, ast.Import):
      yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      yield node.module


def _importers(package, allowed):
  """Modules outside ``allowed`` (top-level names under bert_jax) that import ``package``."""
  return [
    str(p.relative_to(REPO))
    for p in (REPO / "bert_jax").rglob("*.py")
    if p.relative_to(REPO / "bert_jax").parts[0].removesuffix(".py") not in allowed
    and any(m.startswith(f"bert_jax.{package}") for m in _imported_modules(p))
  ]


def test_library_never_imports_commands():
  """Belt and braces for the layers contract: no library module imports a command-line tool or
  a benchmark, and the user commands never import the benchmarks."""
  assert not _importers("tools", {"tools", "bench", "main", "console"})
  assert not _importers("bench", {"bench", "console"})


def test_tree_is_formatted_and_lint_clean():
  paths = ["bert_jax", "tests", "configs", "launch"]
  check = _run("ruff", "check", *paths)
  assert check.returncode == 0, check.stdout[-3000:]
  formatted = _run("ruff", "format", "--check", *paths)
  assert formatted.returncode == 0, formatted.stdout[-3000:]


# `bert_jax.names` constant -> the families it names.
_FAMILY_CONSTANTS = {
  "BERT": {"bert"},
  "ALBERT": {"albert"},
  "DISTILBERT": {"distilbert"},
  "ELECTRA": {"electra"},
  "XLNET": {"xlnet"},
  "TRANSFORMER_XL": {"transformer_xl"},
  "ROBERTA": {"roberta"},
  "XLM_ROBERTA": {"xlm_roberta"},
  "XLM": {"xlm"},
}
FAMILY_PACKAGES = frozenset().union(*_FAMILY_CONSTANTS.values())
# Modules that may name families other than their own, and why.
_MAY_NAME = {
  "bert_jax/names.py": FAMILY_PACKAGES,  # The vocabulary.
  "bert_jax/models/families.py": FAMILY_PACKAGES,  # The registry.
}
# ELECTRA's generator is a BERT encoder (`electra/options.generator_config`); XLM-R is
# RoBERTa's architecture under another name.
_MAY_NAME_IN_PACKAGE = {"electra": {"bert"}, "xlm_roberta": {"roberta"}}


def _family_mentions(path):
  """Families a module names: a family constant of `names`, an import of a family's package
  (``bert_jax.models.<family>``), or a comparison with a family's name literal
  (``family == "electra"``)."""
  for node in ast.walk(helpers.parse_python(path)):
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
      if node.value.id == "names" and node.attr in _FAMILY_CONSTANTS:
        yield from _FAMILY_CONSTANTS[node.attr]
    elif isinstance(node, ast.ImportFrom) and node.module == "bert_jax.names":
      for alias in node.names:
        yield from _FAMILY_CONSTANTS.get(alias.name, ())
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
      modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
      if isinstance(node, ast.ImportFrom) and node.module == "bert_jax.models":
        modules = [f"bert_jax.models.{a.name}" for a in node.names]
      for module in filter(None, modules):
        parts = module.split(".")
        if parts[:2] == ["bert_jax", "models"] and len(parts) > 2 and parts[2] in FAMILY_PACKAGES:
          yield parts[2]
    elif isinstance(node, ast.Compare):
      for side in (node.left, *node.comparators):
        # "bert" is also the trunk's parameter scope (tasks/trunk.py), compared as such.
        if isinstance(side, ast.Constant) and side.value in FAMILY_PACKAGES - {"bert"}:
          yield side.value


def _package(relative: pathlib.Path) -> str:
  parts = relative.parts
  if parts[:2] == ("bert_jax", "models") and len(parts) > 3 and parts[2] in FAMILY_PACKAGES:
    return parts[2]
  return ""


def test_every_family_is_a_package():
  assert set(names.FAMILIES) == FAMILY_PACKAGES
  for family in names.FAMILIES:
    assert (REPO / "bert_jax" / "models" / family / "family.py").is_file(), family


def test_only_a_family_package_names_its_family():
  """A family is one package, `bert_jax/models/<family>/`: no other module (the trainer,
  tasks, tools, shared model blocks, another family) names it or imports it; they ask the
  registry (`models/families.py`) for its `Family` record."""
  offenders = {}
  for path in (REPO / "bert_jax").rglob("*.py"):
    relative = path.relative_to(REPO)
    own = _package(relative)
    allowed = _MAY_NAME.get(str(relative), set()) | {own} | _MAY_NAME_IN_PACKAGE.get(own, set())
    named = set(_family_mentions(path)) - allowed
    if named:
      offenders[str(relative)] = sorted(named)
  assert offenders == {}


def test_the_family_check_sees_a_branch(tmp_path):
  """A module that branches on a family's name or imports a family's package is reported."""
  module = tmp_path / "branch.py"
  module.write_text(
    "from bert_jax import names\nfrom bert_jax.models.albert.model import AlbertEncoder\n"
    "from bert_jax.models import distilbert, layers\n"
    "def f(c):\n  return c.family == names.XLNET or c.family in ('x',) or c.family == 'electra'\n"
  )
  assert sorted(set(_family_mentions(module))) == ["albert", "distilbert", "electra", "xlnet"]
