"""The order in which xdist's workers take the test files: longest first (tests/file_order.py)."""

import json
import types

from tests import file_order


def _items(*nodeids):
  return [types.SimpleNamespace(nodeid=nodeid) for nodeid in nodeids]


def test_files_go_longest_first_unknown_ahead_and_each_file_keeps_its_order():
  items = _items("a.py::one", "b.py::one", "a.py::two", "c.py::one", "d.py::one", "b.py::two")
  durations = {"a.py": 5.0, "b.py": 50.0, "c.py": 1.0}

  ordered = [item.nodeid for item in file_order.longest_first(items, durations)]

  assert ordered == ["d.py::one", "b.py::one", "b.py::two", "a.py::one", "a.py::two", "c.py::one"]


def test_the_recorder_sums_each_files_phases(tmp_path):
  path = tmp_path / "durations.json"
  recorder = file_order.DurationRecorder(path)
  for nodeid, seconds in [
    ("a.py::x", 1.0),
    ("a.py::x", 0.5),
    ("a.py::y[1]", 2.0),
    ("b.py::z", 4.0),
  ]:
    recorder.pytest_runtest_logreport(types.SimpleNamespace(nodeid=nodeid, duration=seconds))
  recorder.pytest_sessionfinish(session=None)

  assert json.loads(path.read_text()) == {"b.py": 4.0, "a.py": 3.5}
  assert file_order.load(path) == {"b.py": 4.0, "a.py": 3.5}
  assert file_order.load(tmp_path / "missing.json") == {}


def test_the_suite_runs_in_that_order(request, pytestconfig):
  """xdist's own reordering is off (conftest), and the collection is longest first."""
  if pytestconfig.pluginmanager.hasplugin("xdist"):
    assert pytestconfig.getoption("loadscopereorder") is False
  durations = file_order.load()
  assert durations, "tests/file_durations.json is missing"
  files = list(dict.fromkeys(item.nodeid.split("::")[0] for item in request.session.items))
  known = [file for file in files if file in durations]
  assert known == sorted(known, key=lambda file: -durations[file])
  assert all(file not in durations for file in files[: len(files) - len(known)])
