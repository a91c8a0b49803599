"""glibc malloc settings for the long-running broker: big buffers from the heap, freed memory kept.

Owns one decision, made once at broker start. Every produce request arrives in a buffer of its size
(1 MB for librdkafka's default batches) and is copied once for offset assignment; glibc serves such
blocks with mmap and unmaps them when freed, or trims the heap top, so the broker keeps handing
memory back to the kernel and faulting it in again. On the project's VMs a page the kernel gets
back is also returned to the hypervisor (free page reporting), and touching it again costs about
2.5 ms per MiB (docs: PLATFORM.md). Measured (bench/produce_validation.py, 1 KB records): broker CPU
1.3-1.6 us per record when a process falls into that pattern, 0.6-0.7 us when it does not, both
runs of the same code.

Kafka's JVM keeps its heap. Here `M_MMAP_THRESHOLD` is fixed at 32 MiB (glibc's own ceiling for
its dynamic threshold) and `M_TRIM_THRESHOLD` at 256 MiB, so the broker keeps what it has used,
which `queued.max.request.bytes` bounds. A no-op where glibc's `mallopt` is missing.
"""
from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def keep_freed_memory(mmap_threshold: int = 32 << 20, trim_threshold: int = 256 << 20) -> bool:
    """Apply the settings above; False where the C library has no `mallopt` (not glibc)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(M_TRIM_THRESHOLD, trim_threshold))
    if not ok:
        log.debug("mallopt refused the broker's allocator settings")
    return ok
