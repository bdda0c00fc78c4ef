"""The ``bert-jax`` command: one program whose subcommands are the user commands.

  bert-jax train --config=configs/bert_tiny.py --workdir=/tmp/bert_tiny
  bert-jax convert --from=hf --input=/models/bert-base-uncased --output=/runs/bert_base_hf
  bert-jax <command> --help

Each subcommand is a module with ``main(argv)`` (``argv[0]`` the program name) that also runs as
``python -m <module>``. A module is imported only when its subcommand runs, so ``bert-jax
--help`` answers without loading jax.
"""

import importlib
import sys

# Subcommand -> (module with main(argv), one line of what it does). Adding a command is a row.
COMMANDS = {
  "train": ("bert_jax.main", "pretrain, fine-tune, evaluate or predict: one run from a config"),
  "config-keys": ("bert_jax.tools.config_keys", "list every --config.<key> with its default"),
  "prepare-data": (
    "bert_jax.tools.create_pretraining_data",
    "text files -> sharded pretraining TFRecords",
  ),
  "train-vocab": ("bert_jax.tools.train_vocab", "train a WordPiece or BPE vocab on text files"),
  "convert": ("bert_jax.tools.convert", "Hugging Face / TF checkpoints <-> bert_jax workdirs"),
  "embed": ("bert_jax.tools.embed", "contextual embeddings of lines of text, saved as .npz"),
  "export-task": ("bert_jax.tools.export_task", "one task of a multi-task run as its own workdir"),
  "compile": ("bert_jax.tools.aot_compile", "compile the train step for a TPU / GPU topology"),
  "analyze-attention": (
    "bert_jax.tools.analyze_attention",
    "which heads track which syntactic relations, from a CoNLL-U file, with pictures",
  ),
  "synthetic-pairs": (
    "bert_jax.tools.synthetic_pairs",
    "write the synthetic parallel corpus of configs/xlm_tlm_tiny.py",
  ),
}

PROGRAM = "bert-jax"


def usage() -> str:
  """The top-level help: every subcommand and its one line."""
  width = max(map(len, COMMANDS))
  rows = "\n".join(f"  {name:<{width}}  {line}" for name, (_, line) in COMMANDS.items())
  return (
    f"usage: {PROGRAM} <command> [flags]\n\ncommands:\n{rows}\n\n"
    f"'{PROGRAM} <command> --help' lists a command's flags with their defaults."
  )


def main(argv=None) -> int:
  """Runs the subcommand ``argv[1]`` names with the rest of ``argv``; returns its exit status.

  Args:
    argv: program name, subcommand and its flags (default ``sys.argv``).

  Returns:
    The subcommand's status; 0 for ``--help``; 2 after one ``error:`` line for an unknown or
    missing subcommand.
  """
  argv = sys.argv if argv is None else list(argv)
  if len(argv) < 2 or argv[1] in ("-h", "--help", "help"):
    print(usage())
    return 0 if len(argv) >= 2 else 2
  name = argv[1]
  if name not in COMMANDS:
    print(
      f"error: {PROGRAM} has no command {name!r}; one of {', '.join(COMMANDS)} "
      f"(see {PROGRAM} --help)",
      file=sys.stderr,
    )
    return 2
  module = importlib.import_module(COMMANDS[name][0])
  status = module.main([f"{PROGRAM} {name}", *argv[2:]])
  return status or 0


def run():
  """The console script: exits with `main`'s status."""
  sys.exit(main())


if __name__ == "__main__":
  run()
