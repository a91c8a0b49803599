"""pylog/tools/allocator.py: the broker's glibc settings are accepted on the project's machines (glibc)."""
from __future__ import annotations

import platform

from pylog.tools.allocator import keep_freed_memory


def test_glibc_accepts_the_brokers_mmap_and_trim_thresholds():
    assert platform.libc_ver()[0] == "glibc"
    assert keep_freed_memory() is True
