"""TimeIndex: the sparse `.timeindex` file of one segment, mapping timestamps to offsets.

Owns: entries of (timestamp int64, relative offset int32), 12 bytes each, big-endian. An entry
(T, o) is added at index points only when T is a new maximum, and means: every record before
offset o has a timestamp <= T, and the batch starting at o has max timestamp T. So timestamps
strictly increase. The segment's last entry is its largest timestamp (the segment appends a final
entry when it is sealed or closed). Never reads the log file.
"""
from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_left
from pathlib import Path

from broker.log.constants import TIME_INDEX_ENTRY_SIZE
from broker.log.index_file import IndexFile

log = logging.getLogger(__name__)

_ENTRY = struct.Struct(">qi")


class TimeIndex(IndexFile):
    entry_size = TIME_INDEX_ENTRY_SIZE

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self._timestamps: list[int] = []
        self._relative: list[int] = []

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    def load(self) -> bool:
        """Read the file into memory; False (and empty) if it is missing or fails the sanity check."""
        data = self._read_file()
        self.clear()
        if len(data) % self.entry_size:
            log.warning("time index %s has size %d, not a multiple of %d", self.path, len(data), self.entry_size)
            return False
        entries = list(_ENTRY.iter_unpack(data))
        ts = [e[0] for e in entries]
        rel = [e[1] for e in entries]
        ok = all(a < b for a, b in zip(ts, ts[1:])) and all(a <= b for a, b in zip(rel, rel[1:]))
        if ok and rel:
            ok = rel[0] >= 0
        if not ok:
            log.warning("time index %s has entries out of order", self.path)
            return False
        self._timestamps, self._relative = ts, rel
        return True

    def read_last_entry(self) -> tuple[int, int]:
        """The last entry straight from the file (no full load): (timestamp, offset) or (-1, base)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return -1, self.base_offset
        try:
            size = os.fstat(fd).st_size
            size -= size % self.entry_size
            if size == 0:
                return -1, self.base_offset
            ts, rel = _ENTRY.unpack(os.pread(fd, self.entry_size, size - self.entry_size))
            return ts, self.base_offset + rel
        finally:
            os.close(fd)

    def clear(self) -> None:
        self._timestamps = []
        self._relative = []

    def reset(self) -> None:
        self.truncate_file()
        self.clear()

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is a new maximum and there is room."""
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        if timestamp < 0 or (self.is_full and not skip_full_check):
            return
        rel = offset - self.base_offset
        self._timestamps.append(timestamp)
        self._relative.append(rel)
        self._buffer(_ENTRY.pack(timestamp, rel))

    def lookup(self, timestamp: int) -> int:
        """Offset to start scanning from for the first record with timestamp >= `timestamp`.

        The last entry with T < timestamp: every record before its offset is older than the target.
        """
        i = bisect_left(self._timestamps, timestamp) - 1
        if i < 0:
            return self.base_offset
        return self.base_offset + self._relative[i]

    def last_entry(self) -> tuple[int, int]:
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self.base_offset + self._relative[-1]
