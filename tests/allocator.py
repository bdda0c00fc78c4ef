"""glibc's allocator in the test processes: freed memory kept for reuse, not returned at once.

XLA:CPU allocates each execution's temporary buffers anew. At glibc's defaults a buffer above
the mmap threshold (128 KiB, raised as large blocks are freed, to 32 MiB at most) is a mapping
of its own, whose pages the kernel zeroes on first touch, and freed memory goes back to the
kernel: the 250 steps of ALBERT's SOP test took 3.1 million page faults and 11-13 s of system
time. Served from the heap instead (no mappings of their own) and kept when freed, 0.3 million
and 3 s, with the same steps and losses. Memory stays with the process that used it (its peak
grew from 1.5 to 1.6-1.7 GB there), which a test process can afford.
"""

import ctypes

# mallopt's parameters (malloc.h) and values.
_OPTIONS = {
  "MMAP_MAX": (-4, 0),
  "TRIM_THRESHOLD": (-1, 1 << 30),
  "TOP_PAD": (-2, 64 << 20),
}

# The same, for a process to start with (glibc reads them when the process starts).
ENVIRONMENT = {f"MALLOC_{name}_": str(value) for name, (_, value) in _OPTIONS.items()}


def keep_freed_memory():
  """Sets `_OPTIONS` in this process where the C library is glibc; does nothing elsewhere."""
  libc = ctypes.CDLL(None)
  if not hasattr(libc, "mallopt"):
    return
  for name, (parameter, value) in _OPTIONS.items():
    if libc.mallopt(parameter, value) != 1:
      raise RuntimeError(f"glibc refused mallopt M_{name}={value}")
