"""Every command README.md and docs/ show names a command, flags and config keys that exist.

The commands are parsed, not run: `bert-jax <command> ...` must be a row of the console's table
and `python -m bert_jax.<module> ...` an importable module; each `--flag` must be one the
command defines, and each `--config.<key>` a declared config key (`default_config.config_keys`).
"""

import ast
import importlib.util
import pathlib
import re

import pytest

from bert_jax import console, default_config

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

_COMMAND = re.compile(r"(bert-jax [a-z][a-z-]*|python3? -m bert_jax(?:\.\w+)+)((?: +[^ `|]+)*)")
_FLAG = re.compile(r"--(?:\[no\])?([A-Za-z0-9_.]+)")


def _commands(text: str):
  """(command, its arguments) for each command in code blocks and inline code of ``text``."""
  text = re.sub(r"\\\n\s*", " ", text)  # Shell line continuations.
  spans = re.findall(r"`([^`\n]+)`", text) + [
    line.strip() for line in text.splitlines() if line.startswith("    ")
  ]
  for span in spans:
    for match in _COMMAND.finditer(span):
      yield match.group(1), match.group(2).split()


def _all_commands():
  found = []
  for doc in DOCS:
    for command, args in _commands(doc.read_text(encoding="utf-8")):
      found.append((doc.name, command, args))
  return found


def _module_of(command: str) -> str:
  if command.startswith("bert-jax "):
    name = command.split()[1]
    assert name in console.COMMANDS, f"bert-jax has no command {name!r}"
    return console.COMMANDS[name][0]
  return command.split()[-1]


# Modules whose flag definitions a command may use: the command layers.
_COMMAND_PACKAGES = ("bert_jax.main", "bert_jax.cli", "bert_jax.tools", "bert_jax.bench")


def _find_spec(module_name: str):
  """The module's spec, or None where the name is no module (a class, say)."""
  try:
    return importlib.util.find_spec(module_name)
  except (ModuleNotFoundError, AttributeError, ValueError):
    return None


def _source_of(module_name: str) -> tuple[ast.Module, str] | None:
  spec = _find_spec(module_name)
  if spec is None or not spec.origin or not spec.origin.endswith(".py"):
    return None
  return ast.parse(pathlib.Path(spec.origin).read_text(encoding="utf-8")), module_name


def _flags_of(module_name: str, seen=None) -> set[str]:
  """Flags defined (``flags.DEFINE_*("name", ...)``) by a command module or the command-layer
  modules it imports; read from the source, so nothing is imported or run."""
  seen = set() if seen is None else seen
  if module_name in seen:
    return set()
  seen.add(module_name)
  parsed = _source_of(module_name)
  if parsed is None:
    return set()
  tree, _ = parsed
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
      if node.func.attr.startswith("DEFINE") and node.args:
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
          names.add(first.value)
    elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bert_jax"):
      for alias in node.names:
        for candidate in (f"{node.module}.{alias.name}", node.module):
          if candidate.startswith(_COMMAND_PACKAGES) and _find_spec(candidate):
            names |= _flags_of(candidate, seen)
            break
  return names


def _config_keys() -> set[str]:
  keys = set()
  for fine_tuning in (False, True):
    keys.update(entry.key for entry in default_config.config_keys(fine_tuning))
  return keys


CONFIG_KEYS = _config_keys()
FINE_TUNING_DATA_KEYS = {k.split(".", 1)[1] for k in CONFIG_KEYS if k.startswith("data.")}


def _is_config_key(key: str) -> bool:
  if key in CONFIG_KEYS:
    return True
  # Multi-task members: data.tasks.<name>.<a fine-tuning data key>.
  parts = key.split(".")
  return parts[:2] == ["data", "tasks"] and len(parts) == 4 and parts[3] in FINE_TUNING_DATA_KEYS


def test_the_docs_show_commands():
  commands = {command for _, command, _ in _all_commands()}
  assert {"bert-jax train", "bert-jax convert", "bert-jax embed"} <= commands
  assert any(command.startswith("python -m bert_jax.bench.") for command in commands)


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.name)
def test_every_command_flag_and_key_exists(doc):
  problems = []
  for command, args in _commands(doc.read_text(encoding="utf-8")):
    module_name = _module_of(command)
    if _find_spec(module_name) is None:
      problems.append(f"{command}: no module {module_name}")
      continue
    for arg in args:
      if not arg.startswith("--") or "<" in arg.split("=")[0]:
        continue
      name = arg[2:].split("=", 1)[0]
      if name.startswith("config."):
        if not _is_config_key(name.removeprefix("config.")):
          problems.append(f"{command}: no config key {name.removeprefix('config.')}")
      elif name not in ("config", "help") and name not in _flags_of(module_name):
        problems.append(f"{command}: no flag --{name}")
  assert not problems, f"{doc.name}:\n" + "\n".join(problems)


def test_a_wrong_flag_or_key_is_caught():
  text = "    bert-jax train --config=c.py --config.model.hiden_size=3 --wrokdir=/tmp/x\n"
  ((command, args),) = _commands(text)
  assert command == "bert-jax train"
  assert not _is_config_key("model.hiden_size")
  assert "wrokdir" not in _flags_of(_module_of(command))
  assert "workdir" in _flags_of(_module_of(command))
