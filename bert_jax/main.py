"""Entry point: flags -> `train_and_evaluate(config, workdir)`.

  bert-jax train --config=configs/bert_tiny.py --workdir=/tmp/bert_tiny
  python -m bert_jax.main --config=configs/bert_tiny.py --workdir=/tmp/bert_tiny  (the same)

Any config key can be set on the command line after --config: --config.<key>=value, sections
dotted, e.g. --config.num_train_steps=100 --config.model.dtype=bfloat16. Every key with its
default and description: `bert-jax config-keys` (python -m bert_jax.tools.config_keys; add
--fine_tuning for the fine-tuning data keys).

Multi-process off TPU (two processes on a laptop, GPU clusters):
  ... --coordinator_address=127.0.0.1:12355 --num_processes=2 --process_id=0
On Cloud TPU VM slices every worker runs the same command; `jax.distributed` finds its peers.
"""

import logging as std_logging
import os
import sys

from absl import app, flags, logging
from etils import epath
from ml_collections import config_flags

from bert_jax import environment
from bert_jax.cli import error_lines, runner
from bert_jax.errors import UserInputError


def _define_flags(values: flags.FlagValues, argv):
  flags.DEFINE_string(
    "workdir", None, "Run directory: config, checkpoints, metrics.", flag_values=values
  )
  config_flags.DEFINE_config_file(
    "config",
    None,
    "Config file (configs/*.py).",
    flag_values=values,
    lock_config=True,
    sys_argv=argv,  # --config.<key> overrides come from these arguments, not sys.argv.
  )
  flags.DEFINE_string(
    "coordinator_address",
    None,
    "host:port of process 0, for multi-process runs off TPU.",
    flag_values=values,
  )
  flags.DEFINE_integer("num_processes", None, "Processes in the run.", flag_values=values)
  flags.DEFINE_integer("process_id", None, "This process's index.", flag_values=values)


def _initialize_distributed(values: flags.FlagValues):
  """Joins the multi-process run if there is one (explicit flags, or a multi-host TPU slice)."""
  import jax  # pylint: disable=g-import-not-at-top

  if values["coordinator_address"].value:
    jax.distributed.initialize(
      coordinator_address=values["coordinator_address"].value,
      num_processes=values["num_processes"].value,
      process_id=values["process_id"].value,
    )
  elif "," in os.environ.get("TPU_WORKER_HOSTNAMES", ""):
    jax.distributed.initialize()


class _HideLibraryInfo:
  """Keeps Orbax's per-save INFO lines out of the console; warnings and errors still show."""

  def filter(self, record):
    return record.levelno > std_logging.INFO or "/orbax/" not in record.pathname


def _train(values: flags.FlagValues, argv):
  # config_flags loads the file lazily (and hides why it failed): name a missing file first.
  config_file = error_lines.config_file_arg(argv[1:])
  if config_file and not epath.Path(config_file).is_file():
    config_file = config_file.rsplit(":", 1)[0]  # configs/x.py:<arg>
  if config_file and not epath.Path(config_file).is_file():
    raise UserInputError(
      f"the config file {config_file} does not exist or is not a file; pass "
      "--config=configs/<name>.py"
    )
  if not config_file or not values["workdir"].value:
    raise flags.Error(
      "--config and --workdir are required, e.g. --config=configs/bert_tiny.py "
      "--workdir=/tmp/bert_tiny"
    )
  _initialize_distributed(values)
  import jax  # pylint: disable=g-import-not-at-top

  from bert_jax.train import loop  # pylint: disable=g-import-not-at-top

  logging.info(
    "process %d of %d; %d local / %d global devices (%s)",
    jax.process_index(),
    jax.process_count(),
    jax.local_device_count(),
    jax.device_count(),
    jax.devices()[0].device_kind,
  )
  loop.train_and_evaluate(values["config"].value, values["workdir"].value)


def run(argv=None) -> int:
  """Trains (or resumes) the run ``argv`` describes; returns the exit status.

  Tests call this in-process; bad input gives one ``error:`` line and 2 (3: non-finite loss).
  """
  environment.quiet_tensorflow()
  environment.limit_jax_to_present_platforms()
  argv = sys.argv if argv is None else list(argv)
  return runner.run(
    __doc__, lambda values: _define_flags(values, argv), lambda values: _train(values, argv), argv
  )


def _main(argv):
  logging.get_absl_handler().addFilter(_HideLibraryInfo())
  status = run(argv)
  if status:
    # A failed asynchronous save leaves Orbax threads that would print pages of tracebacks at
    # interpreter exit, burying the one error line; nothing is left to flush.
    logging.flush()
    os._exit(status)  # pylint: disable=protected-access


def main(argv=None):
  """`run` as a program (``bert-jax train``): absl's logging set up, exits with its status."""
  # absl's own flags (logging) keep their defaults; ours are parsed by `run`.
  app.run(_main, argv=argv, flags_parser=lambda argv: (flags.FLAGS(argv[:1]), argv)[1])


if __name__ == "__main__":
  main()
