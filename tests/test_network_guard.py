"""The socket guard of tests/conftest.py (tests/network_guard.py): a connection to another
machine is refused and fails the test, in the test process and in the processes it starts;
loopback stays open; tensorflow-datasets' GCS access is off."""

import pathlib
import socket
import subprocess
import sys
import textwrap

import pytest

from tests import network_guard

REPO = pathlib.Path(__file__).resolve().parents[1]

# TEST-NET-1 (RFC 5737): documentation only, never routed, so nothing leaves even unguarded.
OUTSIDE = ("192.0.2.1", 80)


def _take_refusals(log):
  """The refusals logged so far, cleared so that conftest does not fail this test for them."""
  text = log.read_text()
  log.write_text("")
  return text


def test_a_connection_outside_this_machine_is_refused_and_logged(_network_log):
  with pytest.raises(network_guard.NetworkAccessRefusedError, match="192.0.2.1:80, outside this"):
    socket.create_connection(OUTSIDE, timeout=1)
  with socket.socket(socket.AF_INET6) as s, pytest.raises(network_guard.NetworkAccessRefusedError):
    s.connect_ex(("2001:db8::1", 443, 0, 0))
  with pytest.raises(network_guard.NetworkAccessRefusedError, match="example.com:443"):
    socket.create_connection(("example.com", 443), timeout=1)  # Names are refused unresolved.
  refusals = _take_refusals(_network_log).splitlines()
  assert [line.split(" connected to ")[1] for line in refusals] == [
    "192.0.2.1:80",
    "2001:db8::1:443",
    "example.com:443",
  ]


def test_a_caught_refusal_still_fails_the_test(tmp_path):
  """A pytest run with this conftest: the test swallows the refusal, and still errors."""
  (tmp_path / "conftest.py").write_text(
    f"import sys\nsys.path.insert(0, {str(REPO)!r})\n"
    "from tests.conftest import _network_log, _no_network, pytest_configure  # noqa: F401\n"
  )
  (tmp_path / "test_swallowed.py").write_text(
    textwrap.dedent(
      f"""
      import socket

      def test_swallows_it():
        try:
          socket.create_connection({OUTSIDE!r}, timeout=1)
        except Exception:
          pass
      """
    )
  )
  run = subprocess.run(
    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_swallowed.py"],
    cwd=tmp_path,
    capture_output=True,
    text=True,
    check=False,
    timeout=300,
  )
  assert "1 passed, 1 error" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
  assert "the test tried to reach the network: pid " in run.stdout
  assert "connected to 192.0.2.1:80" in run.stdout


def test_processes_started_by_a_test_are_guarded_too(_network_log):
  child = subprocess.run(
    [sys.executable, "-c", f"import socket; socket.create_connection({OUTSIDE!r}, timeout=1)"],
    capture_output=True,
    text=True,
    check=False,
  )
  assert child.returncode != 0
  assert "NetworkAccessRefusedError: a test opened a socket to 192.0.2.1:80" in child.stderr
  assert "connected to 192.0.2.1:80" in _take_refusals(_network_log)


def test_loopback_stays_open():
  with socket.socket() as server:
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    with socket.create_connection(server.getsockname(), timeout=5):
      accepted, _ = server.accept()
      accepted.close()
  assert network_guard.is_local(socket.AF_INET6, ("::1", 0, 0, 0))
  assert network_guard.is_local(socket.AF_INET6, ("::ffff:127.0.0.1", 0, 0, 0))
  assert network_guard.is_local(socket.AF_UNIX, "/tmp/socket")
  assert not network_guard.is_local(socket.AF_INET6, ("::ffff:192.0.2.1", 0, 0, 0))


def test_tensorflow_datasets_does_not_ask_google_cloud_storage():
  from tensorflow_datasets.core.utils import gcs_utils  # pylint: disable=g-import-not-at-top

  assert not gcs_utils.is_dataset_on_gcs("mnist/3.0.1")
  assert gcs_utils.gcs_dataset_info_files("mnist/3.0.1") is None
