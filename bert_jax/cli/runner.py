"""Command-line plumbing shared by main, the tools and the benchmarks: absl flags, one error
boundary.

Each call parses into a fresh `flags.FlagValues`, so tests can run a tool (or main) in-process
as often as they like without touching global absl flags. `guard` is the error boundary every
entry point ends in (`error_lines` says which errors become one line).
"""

import sys
from collections.abc import Callable

from absl import flags

from bert_jax import environment
from bert_jax.cli import error_lines


def guard(body: Callable[[], object]) -> int:
  """Runs ``body``; a user, storage, decoding or config error becomes one ``error:`` line.

  Args:
    body: the command's work.

  Returns:
    0 on success, else the status `error_lines.describe` gives (3 for a non-finite loss).
    Other exceptions (bugs) propagate with their traceback.
  """
  # Before jax initialises: a host without a TPU or GPU does not probe for them.
  environment.limit_jax_to_present_platforms()
  try:
    body()
  except Exception as error:  # pylint: disable=broad-except
    described = error_lines.describe(error)
    if described is None:
      raise
    line, status = described
    sys.stdout.flush()
    print(line, file=sys.stderr, flush=True)
    return status
  return 0


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
    body: does the work; bad input raises `UserInputError` (see `guard` for the rest).
    argv: program name and arguments.

  Returns:
    0 on success, 2 after printing one ``error:`` line to stderr for bad input or flags
    (3 for a non-finite loss).
  """
  argv = sys.argv if argv is None else list(argv)
  values = flags.FlagValues()
  define_flags(values)
  if any(arg in ("-h", "--help", "--helpfull") for arg in argv[1:]):
    print(doc + "\n" + values.get_help())
    return 0
  try:
    values(argv)
  except Exception as error:  # pylint: disable=broad-except
    print(error_lines.parse_error_line(error, argv), file=sys.stderr, flush=True)
    return error_lines.USER_ERROR_EXIT
  return guard(lambda: body(values))


def run_absl(main: Callable[[list], object], argv=None) -> int:
  """`run` for tools that define their flags on absl's global ``flags.FLAGS``.

  Args:
    main: the tool's ``main(argv)``, called with the arguments left after the flags.
    argv: program name and arguments (default ``sys.argv``).

  Returns:
    0 on success; 2 after one ``error:`` line for bad flags or input (see `guard`).
  """
  argv = sys.argv if argv is None else list(argv)
  if any(arg in ("-h", "--help", "--helpfull") for arg in argv[1:]):
    print(flags.FLAGS.main_module_help())
    return 0
  flags.FLAGS.unparse_flags()  # In-process callers (tests) may parse several times.
  # ml_collections reads --config.<key> overrides from sys.argv while parsing.
  program_argv, sys.argv = sys.argv, argv
  try:
    rest = flags.FLAGS(argv)
  except Exception as error:  # pylint: disable=broad-except
    print(error_lines.parse_error_line(error, argv), file=sys.stderr, flush=True)
    return error_lines.USER_ERROR_EXIT
  finally:
    sys.argv = program_argv
  return guard(lambda: main(rest))
