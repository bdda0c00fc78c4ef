"""`python -m bert_jax.main` that also prints, at exit, one JSON line: jax's compilation-cache
events (jax counts a request, then a hit, or a miss when it writes a new entry) and which of
`WATCHED` the process imported (tests/test_program_start.py)."""

import atexit
import collections
import json
import sys

import jax

WATCHED = {"keras", "matplotlib", "sklearn", "scipy.stats", "tensorflow"}


def main():
  events = collections.Counter()
  jax.monitoring.register_event_listener(lambda name, **_: events.update([name]))
  atexit.register(
    lambda: print(
      json.dumps(
        {
          "modules": sorted(WATCHED & set(sys.modules)),
          **{k.split("/")[-1]: v for k, v in events.items()},
        }
      )
    )
  )
  from bert_jax import main as program  # pylint: disable=g-import-not-at-top

  program.main(sys.argv)


if __name__ == "__main__":
  main()
