"""Keep glibc from returning and re-faulting memory for every multi-megabyte body.

Each inspected request holds its whole body (an inline 12 MP photo is 4-5 MB). With glibc's
defaults such buffers are mmap'ed and unmapped per request, so every request pays about a
thousand page faults per megabyte; measured in ``bench/proxy.py``, that more than doubles the
sidecar's CPU per image request. Raising the mmap and trim thresholds keeps freed memory in
the heap for the next request. The cost is that RSS stays near its peak after a burst, up to
the trim threshold. Setting ``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_`` in the
environment (glibc's own tunables) overrides this and leaves glibc as configured.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

MMAP_THRESHOLD_BYTES = 64 << 20
TRIM_THRESHOLD_BYTES = 256 << 20
_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers, from <malloc.h>
_M_MMAP_THRESHOLD = -3
_OPERATOR_TUNABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def tune_allocator() -> bool:
    """Raise glibc's thresholds for this process; False where it does not apply."""
    if not sys.platform.startswith("linux") or any(k in os.environ for k in _OPERATOR_TUNABLES):
        return False
    path = ctypes.util.find_library("c")
    if path is None:
        return False
    try:
        mallopt = ctypes.CDLL(path).mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
