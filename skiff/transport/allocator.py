"""glibc's allocator tuned for a server process: large request and answer buffers reused from
the heap instead of mapped and faulted in afresh for each request.

A batching Kafka client's ProduceRequests and Fetch answers are MiB-sized, and a broker makes
and frees such buffers on every request. Under glibc's defaults each was a fresh mmap (or heap
memory given back to the kernel after the last request), so the kernel faulted and zeroed every
page again: about a fifth of the broker's CPU in a 1 KiB Kafka drain (docs/performance.md,
"Kafka: the allocator"). `tune_for_server` sets the two thresholds of `skiff.common.limits`
with ``mallopt``; it does nothing where the C library is not glibc, and leaves glibc's
settings alone when the environment sets either threshold (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_`` or ``glibc.malloc`` in ``GLIBC_TUNABLES``): the operator's choice.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

from skiff.common.limits import SERVER_MALLOC_MMAP_THRESHOLD_BYTES, SERVER_MALLOC_TRIM_BYTES

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter numbers (malloc.h)."""
OPERATOR_SETTINGS = frozenset({"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"})
"""Environment variables by which glibc takes the thresholds from the operator."""


def tune_for_server() -> bool:
    """Set the server thresholds; whether they were set."""
    if OPERATOR_SETTINGS & os.environ.keys() or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = (mallopt(M_MMAP_THRESHOLD, SERVER_MALLOC_MMAP_THRESHOLD_BYTES) == 1
            and mallopt(M_TRIM_THRESHOLD, SERVER_MALLOC_TRIM_BYTES) == 1)
    if not done:
        log.warning("glibc refused the server allocator thresholds: keeping its defaults")
    return done
