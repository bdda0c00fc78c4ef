"""Command-line plumbing shared by the tools: absl flags, one-line errors, exit status 2.

Each call parses into a fresh `flags.FlagValues`, so tests can run a tool in-process as often
as they like without touching the global absl flags of `bert_jax.main`.
"""

import sys
from collections.abc import Callable

from absl import flags

from bert_jax.errors import UserInputError


def run(
  doc: str,
  define_flags: Callable[[flags.FlagValues], None],
  body: Callable[[flags.FlagValues], None],
  argv=None,
) -> int:
  """Parses ``argv`` (default ``sys.argv``) and runs ``body``; returns the exit status.

  Args:
    doc: the tool's usage text, printed with the flags for ``--help``.
    define_flags: defines the tool's flags on the `FlagValues` it is given.
    body: does the work; bad input raises `UserInputError` (or `FileNotFoundError`).
    argv: program name and arguments.

  Returns:
    0 on success, 2 after printing one ``error:`` line to stderr for bad input or flags.
  """
  argv = sys.argv if argv is None else list(argv)
  values = flags.FlagValues()
  define_flags(values)
  if any(arg in ("-h", "--help", "--helpfull") for arg in argv[1:]):
    print(doc + "\n" + values.get_help())
    return 0
  try:
    values(argv)
    body(values)
  except (UserInputError, FileNotFoundError, flags.Error) as error:
    print("error: " + " ".join(str(error).splitlines()), file=sys.stderr)
    return 2
  return 0
