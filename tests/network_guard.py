"""Refuses sockets to addresses outside this machine, and name lookups that would ask a name
server, so no test reaches the network.

tests/conftest.py installs the guard in the test process and, through
tests/network_guard_site/sitecustomize.py on PYTHONPATH, in every Python process a test starts.
Each refused attempt is also appended to the file named by ``$BERT_JAX_TEST_NETWORK_LOG``, so a
test fails even where the code under test catches the error (conftest reads the file after each
test). Loopback stays open: two-process tests meet on 127.0.0.1. The guard sees Python's
sockets only; C++ clients (TensorFlow's GCS file system, gRPC) are kept offline by their own
switches (conftest turns tensorflow-datasets' GCS access off).
"""

import ipaddress
import os
import socket

LOG_ENV = "BERT_JAX_TEST_NETWORK_LOG"
_LOCAL_NAMES = ("localhost", "")


class NetworkAccessRefusedError(RuntimeError):
  """A test tried to open a socket to an address outside this machine.

  A RuntimeError, not an OSError, so that code which treats OSError as "offline" does not
  quietly take another path.
  """


def is_local(family, address):
  """Whether connecting a socket of ``family`` to ``address`` stays on this machine.

  Args:
    family: the socket's address family (``socket.AF_INET``, ``AF_UNIX``, ...).
    address: what was passed to ``connect``.

  Returns:
    True for non-IP sockets and for loopback or unspecified (0.0.0.0, ::) addresses.
  """
  if family not in (socket.AF_INET, socket.AF_INET6):
    return True
  host = address[0]
  if host in _LOCAL_NAMES:
    return True
  try:
    ip = ipaddress.ip_address(host.split("%", 1)[0])  # An IPv6 host may carry "%<zone>".
  except ValueError:
    return False  # A name other than localhost would be resolved and reached.
  if getattr(ip, "ipv4_mapped", None):
    ip = ip.ipv4_mapped
  return ip.is_loopback or ip.is_unspecified


def _is_own_name(host):
  """Whether ``host`` needs no name server: localhost, this machine's name, or an address."""
  if host is None or host in _LOCAL_NAMES or host == socket.gethostname():
    return True
  try:
    ipaddress.ip_address(host.split("%", 1)[0])
  except ValueError:
    return False
  return True  # connect() checks the address itself.


def _refuse(address):
  where = f"{address[0]}:{address[1]}"
  log = os.environ.get(LOG_ENV)
  if log:
    with open(log, "a", encoding="utf-8") as f:
      f.write(f"pid {os.getpid()} connected to {where}\n")
  raise NetworkAccessRefusedError(
    f"a test opened a socket to {where}, outside this machine; tests must not use the network "
    "(build the data in the test, or use 127.0.0.1)"
  )


def install():
  """Makes ``socket.socket.connect`` / ``connect_ex`` refuse non-local addresses, and
  ``socket.getaddrinfo`` names that a name server would resolve (idempotent)."""
  if getattr(socket.socket.connect, "_network_guard", False):
    return
  connect, connect_ex, getaddrinfo = (
    socket.socket.connect,
    socket.socket.connect_ex,
    socket.getaddrinfo,
  )

  def guarded_getaddrinfo(host, port, *args, **kwargs):
    name = host.decode() if isinstance(host, bytes) else host
    if not _is_own_name(name):
      _refuse((name, port))
    return getaddrinfo(host, port, *args, **kwargs)

  def guarded_connect(self, address):
    if not is_local(self.family, address):
      _refuse(address)
    return connect(self, address)

  def guarded_connect_ex(self, address):
    if not is_local(self.family, address):
      _refuse(address)
    return connect_ex(self, address)

  guarded_connect._network_guard = True  # pylint: disable=protected-access
  socket.socket.connect = guarded_connect
  socket.socket.connect_ex = guarded_connect_ex
  socket.getaddrinfo = guarded_getaddrinfo
