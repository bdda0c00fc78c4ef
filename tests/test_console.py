"""The ``bert-jax`` command: registered in setup.py, dispatches to every user command, and each
command's flags carry help text."""

import ast
import re
import subprocess
import sys

import pytest

from bert_jax import console
from tests import run_helpers

# Modules of bert_jax/tools with a `main` that are not `bert-jax` subcommands, and why.
NOT_SUBCOMMANDS = {
  "bert_jax.tools.build_default_corpus",  # Regenerates the corpus the package ships.
}
# absl's own flags, listed under every command's help.
_ABSL_FLAGS = {"flagfile", "undefok"}


def _console(*argv):
  return subprocess.run(
    [sys.executable, "-m", "bert_jax.console", *argv],
    capture_output=True,
    text=True,
    cwd=run_helpers.REPO,
    check=False,
  )


def _flag_help(text):
  """{flag: its help text} of an absl help listing."""
  return dict(re.findall(r"^ {2}--(?:\[no\])?(\w+):(.*)$", text, re.M))


def test_setup_registers_the_console_script():
  tree = ast.parse((run_helpers.REPO / "setup.py").read_text(encoding="utf-8"))
  scripts = [
    ast.literal_eval(k.value)
    for node in ast.walk(tree)
    if isinstance(node, ast.Call)
    for k in node.keywords
    if k.arg == "entry_points"
  ]
  assert scripts == [{"console_scripts": ["bert-jax = bert_jax.console:run"]}]
  assert callable(console.run)


def test_help_lists_every_command():
  result = _console("--help")
  assert result.returncode == 0, result.stderr
  for name, (_, line) in console.COMMANDS.items():
    assert f"  {name}" in result.stdout and line in result.stdout


def test_every_user_command_is_a_subcommand():
  modules = {module for module, _ in console.COMMANDS.values()}
  tools = {
    f"bert_jax.tools.{path.stem}"
    for path in (run_helpers.REPO / "bert_jax" / "tools").glob("*.py")
    if "\ndef main(" in path.read_text(encoding="utf-8")
  }
  assert tools - NOT_SUBCOMMANDS == modules - {"bert_jax.main"}


def test_an_unknown_or_missing_command_is_one_line(capsys):
  assert console.main(["bert-jax", "trian"]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert err == [
    "error: bert-jax has no command 'trian'; one of "
    + ", ".join(console.COMMANDS)
    + " (see bert-jax --help)"
  ]
  assert console.main(["bert-jax"]) == 2
  assert "usage: bert-jax <command>" in capsys.readouterr().out


def test_config_keys_lists_every_key_with_its_default(capsys):
  assert console.main(["bert-jax", "config-keys"]) == 0
  lines = capsys.readouterr().out.splitlines()
  assert "num_train_steps = 1000000  # Optimizer updates." in lines
  assert any(line.startswith("model.hidden_size = ") for line in lines)
  assert all(re.fullmatch(r"[\w.]+ = .+  # .+", line) for line in lines), lines


def test_train_help_explains_config_overrides_and_lists_keys():
  result = _console("train", "--help")
  assert result.returncode == 0, result.stderr
  assert "--config.<key>=value" in result.stdout
  assert "bert-jax config-keys" in result.stdout
  flags = _flag_help(result.stdout)
  assert {"config", "workdir", "coordinator_address"} <= set(flags)
  assert all(text.strip() for text in flags.values()), flags


@pytest.mark.parametrize("name", [n for n in console.COMMANDS if n != "train"])
def test_every_flag_of_a_command_has_help_and_its_default(capsys, name):
  assert console.main(["bert-jax", name, "--help"]) == 0
  text = capsys.readouterr().out
  flags = {k: v for k, v in _flag_help(text).items() if k not in _ABSL_FLAGS}
  assert flags, text
  assert [flag for flag, help_text in flags.items() if not help_text.strip()] == []
  # absl prints a flag's default under its help unless the flag has none (a required flag).
  blocks = re.split(r"^ {2}--", text, flags=re.M)[1:]
  assert any("(default:" in block for block in blocks), text
