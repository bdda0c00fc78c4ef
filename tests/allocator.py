"""glibc's allocator in the test processes: freed memory kept for reuse, not returned at once.

XLA:CPU allocates each execution's temporary buffers anew. At glibc's defaults a buffer above
the mmap threshold (128 KiB, raised as large blocks are freed) is a mapping of its own, whose
pages the kernel zeroes on first touch, and freed memory goes back to the kernel: the 250 steps
of ALBERT's SOP test took 3.1 million page faults and 11 s of system time. With the threshold at
its largest (32 MiB) and freed memory kept, 1.2-1.6 million and 6 s, the same steps and losses.
Memory stays with the process that used it, which a test process can afford.
"""

import ctypes

# mallopt's parameters (malloc.h) and values.
_OPTIONS = {
  "MMAP_THRESHOLD": (-3, 32 << 20),
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
