"""FetchSlice: the answer to a read, a byte range of one segment file that Fetch sends as-is.

Owns: the (fd, position, length) triple and a pread helper for callers that cannot use
os.sendfile (tests, TLS). Never copies data unless `read_bytes` is called.

The fd belongs to the segment: callers must not close it. It stays valid while the segment is
live and for file.delete.delay.ms after the segment is deleted.
"""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FetchSlice:
    fd: int
    position: int
    length: int                  # 0 when the read starts at the log end offset
    segment_base_offset: int

    def read_bytes(self) -> bytes:
        """The slice's bytes, read with os.pread."""
        parts = []
        done = 0
        while done < self.length:
            chunk = os.pread(self.fd, self.length - done, self.position + done)
            if not chunk:
                break
            parts.append(chunk)
            done += len(chunk)
        return b"".join(parts)
