"""The order in which the test files are handed to pytest-xdist's workers: the longest first.

README's command runs the suite as ``-n 2 --dist loadfile``: each worker takes a whole file,
and asks for the next when it is nearly done with its own. xdist's default queue puts the
files with the most tests first, which leaves long files of a few tests each (the learning
runs) for the end, where one worker may still run one for a minute after the other has
finished. Longest first, the last files are the short ones and both workers finish together
(a schedule of the measured durations: 1,045 / 1,002 s of work per worker in xdist's order,
1,023 / 1,023 longest first). conftest applies `longest_first`, turns xdist's own reordering
off, and `--record-file-durations` refreshes `DURATIONS` from a run.

The durations only decide the order: a stale or missing entry costs time, never a result. A
file without one (a new file) goes first, as the one whose cost is unknown.
"""

import collections
import json
import pathlib

# Seconds each test file took, summed over its tests' setup, call and teardown, in a run of
# README's command on a 2-core machine.
DURATIONS = pathlib.Path(__file__).with_name("file_durations.json")


def _file_of(nodeid):
  return nodeid.split("::", 1)[0]


def load(path=DURATIONS):
  """Reads a durations file.

  Args:
    path: a JSON object of test file (as in a node id) to seconds.

  Returns:
    That mapping; empty where the file does not exist.
  """
  path = pathlib.Path(path)
  if not path.exists():
    return {}
  return json.loads(path.read_text(encoding="utf-8"))


def longest_first(items, durations):
  """Orders collected tests by their file's duration, longest first, files without a duration
  ahead of all; the tests of one file stay together and in their order.

  Args:
    items: pytest's collected items (anything with a ``nodeid``).
    durations: test file to seconds, as `load` returns.

  Returns:
    A new list of the same items.
  """
  by_file = collections.defaultdict(list)
  for item in items:
    by_file[_file_of(item.nodeid)].append(item)
  # Unknown files sort as infinitely long; ties keep the collection's order (a stable sort).
  files = sorted(by_file, key=lambda file: -durations.get(file, float("inf")))
  return [item for file in files for item in by_file[file]]


class DurationRecorder:
  """A pytest plugin that sums each test file's durations and writes them to a file at the
  end of the run; under xdist it runs in the controller, which sees every worker's reports."""

  def __init__(self, path):
    self._path = pathlib.Path(path)
    self._seconds = collections.defaultdict(float)

  def pytest_runtest_logreport(self, report):
    self._seconds[_file_of(report.nodeid)] += report.duration

  def pytest_sessionfinish(self, session):
    del session
    ordered = dict(sorted(self._seconds.items(), key=lambda entry: -entry[1]))
    rounded = {file: round(seconds, 1) for file, seconds in ordered.items()}
    self._path.write_text(json.dumps(rounded, indent=1) + "\n", encoding="utf-8")
