"""The one exception type for bad user input (files, configs, checkpoints).

`bert_jax.main` prints such errors as a single line and exits non-zero; anything else is a bug
and keeps its traceback.
"""


class UserInputError(ValueError):
  """Bad input from the user; the message names the problem and the fix on one line."""
