"""Entry point: flags -> `train_and_evaluate(config, workdir)`.

  bert-jax train --config=configs/bert_tiny.py --workdir=/tmp/bert_tiny
  python -m bert_jax.main --config=configs/bert_tiny.py --workdir=/tmp/bert_tiny  (the same)

Any config key can be set on the command line after --config: --config.<key>=value, sections
dotted, e.g. --config.num_train_steps=100 --config.model.dtype=bfloat16. Every key with its
default and description: `bert-jax config-keys` (python -m bert_jax.tools.config_keys; add
--fine_tuning for the fine-tuning data keys).

Every task of a multi-process run started by srun (SLURM), mpirun (Open MPI), a Kubernetes
indexed Job or a Cloud TPU slice runs the same command and finds its peers by itself
(bert_jax/parallel/cluster.py); elsewhere, e.g. two processes on a laptop:
  ... --coordinator_address=127.0.0.1:12355 --num_processes=2 --process_id=0
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
  flags.DEFINE_float(
    "cluster_timeout_s",
    300,
    "Seconds to wait for the other processes of a multi-process run before giving up.",
    flag_values=values,
  )


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
  from bert_jax.parallel import cluster  # pylint: disable=g-import-not-at-top
  from bert_jax.train import loop  # pylint: disable=g-import-not-at-top

  cluster.join(
    values["coordinator_address"].value,
    values["num_processes"].value,
    values["process_id"].value,
    values["cluster_timeout_s"].value,
  )
  loop.train_and_evaluate(values["config"].value, values["workdir"].value)


def run(argv=None) -> int:
  """Trains (or resumes) the run ``argv`` describes; returns the exit status.

  Tests call this in-process; bad input gives one ``error:`` line and 2 (3: non-finite loss).
  """
  environment.quiet_tensorflow()
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
  environment.tensorflow_without_keras()
  # absl's own flags (logging) keep their defaults; ours are parsed by `run`.
  app.run(_main, argv=argv, flags_parser=lambda argv: (flags.FLAGS(argv[:1]), argv)[1])


if __name__ == "__main__":
  main()
