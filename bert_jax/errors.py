"""The exception types the entry points turn into one line (see `bert_jax.cli.error_lines`).

`bert_jax.main` and the tools print such errors as a single line and exit non-zero; anything
else is a bug and keeps its traceback.
"""


class UserInputError(ValueError):
  """Bad input from the user; the message names the problem and the fix on one line."""


class NonFiniteLossError(RuntimeError):
  """The loss or gradient norm became NaN/inf; the last good checkpoint is kept (exit 3)."""
