"""Entry point: flags -> `train_and_evaluate(config, workdir)`.

  python -m bert_jax.main --config=configs/bert_tiny.py --workdir=/tmp/bert_tiny

Multi-process off TPU (two processes on a laptop, GPU clusters):
  ... --coordinator_address=127.0.0.1:12355 --num_processes=2 --process_id=0
On Cloud TPU VM slices every worker runs the same command; `jax.distributed` finds its peers.
"""

import logging as std_logging
import os
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from bert_jax import environment
from bert_jax.errors import UserInputError

_WORKDIR = flags.DEFINE_string(
  "workdir", None, "Run directory: config, checkpoints, metrics.", required=True
)
_CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Config file (configs/*.py).", lock_config=True
)
_COORDINATOR = flags.DEFINE_string(
  "coordinator_address", None, "host:port of process 0, for multi-process runs off TPU."
)
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Processes in the run.")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "This process's index.")


def _initialize_distributed():
  """Joins the multi-process run if there is one (explicit flags, or a multi-host TPU slice)."""
  import jax  # pylint: disable=g-import-not-at-top

  if _COORDINATOR.value:
    jax.distributed.initialize(
      coordinator_address=_COORDINATOR.value,
      num_processes=_NUM_PROCESSES.value,
      process_id=_PROCESS_ID.value,
    )
  elif "," in os.environ.get("TPU_WORKER_HOSTNAMES", ""):
    jax.distributed.initialize()


class _HideLibraryInfo:
  """Keeps Orbax's per-save INFO lines out of the console; warnings and errors still show."""

  def filter(self, record):
    return record.levelno > std_logging.INFO or "/orbax/" not in record.pathname


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  environment.quiet_tensorflow()
  logging.get_absl_handler().addFilter(_HideLibraryInfo())
  try:
    _initialize_distributed()
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
    loop.train_and_evaluate(_CONFIG.value, _WORKDIR.value)
  except (UserInputError, FileNotFoundError) as error:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(2)
  except loop.NonFiniteLossError as error:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(3)


if __name__ == "__main__":
  app.run(main)
