"""Lists every config key with its default and description: what ``--config.<key>=value``
may set.

  python -m bert_jax.tools.config_keys [--fine_tuning]

One line a key, ``key = default  # description``, sections dotted (``model.hidden_size``).
"""

from absl import flags

from bert_jax import default_config
from bert_jax.cli import runner


def _define_flags(values: flags.FlagValues):
  flags.DEFINE_bool(
    "fine_tuning",
    False,
    "List the fine-tuning data section (configs/finetune/*) instead of pretraining's.",
    flag_values=values,
  )


def _print(values: flags.FlagValues):
  print(*default_config.describe(fine_tuning=values.fine_tuning), sep="\n")


def main(argv=None) -> int:
  """Runs the tool on ``argv`` (default ``sys.argv``); returns the exit status."""
  return runner.run(__doc__, _define_flags, _print, argv)


if __name__ == "__main__":
  raise SystemExit(main())
