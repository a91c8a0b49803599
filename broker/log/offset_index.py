"""OffsetIndex: the sparse `.index` file of one segment, mapping offsets to file positions.

Owns: entries of (relative offset int32, position int32), 8 bytes each, big-endian, appended every
`index.interval.bytes` of log; an in-memory copy (two `array`s) for binary search; the sanity check
that decides whether the file must be rebuilt. Invariant: both columns strictly increase, and each
entry names the first offset and the position of a batch. Never reads the log file: the segment
rebuilds the index from the log when `load` reports it corrupt.
"""
from __future__ import annotations

import logging
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

from broker.log.constants import OFFSET_INDEX_ENTRY_SIZE
from broker.log.index_file import IndexFile

log = logging.getLogger(__name__)

_ENTRY = struct.Struct(">ii")


class OffsetIndex(IndexFile):
    entry_size = OFFSET_INDEX_ENTRY_SIZE

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self._relative = array("i")
        self._positions = array("i")

    def __len__(self) -> int:
        return len(self._relative)

    @property
    def is_full(self) -> bool:
        return len(self._relative) >= self.max_entries

    def load(self, log_size: int) -> bool:
        """Read the file into memory; False (and empty) if it is missing or fails the sanity check."""
        data = self._read_file()
        self.clear()
        if len(data) % self.entry_size:
            log.warning("offset index %s has size %d, not a multiple of %d", self.path, len(data), self.entry_size)
            return False
        both = array("i")
        both.frombytes(data)
        if sys.byteorder == "little":
            both.byteswap()
        rel, pos = both[0::2], both[1::2]
        ok = all(a < b for a, b in zip(rel, rel[1:])) and all(a < b for a, b in zip(pos, pos[1:]))
        if ok and rel:
            ok = rel[0] >= 0 and pos[0] >= 0 and pos[-1] < log_size
        if not ok:
            log.warning("offset index %s has entries out of order or past the log end", self.path)
            return False
        self._relative, self._positions = rel, pos
        return True

    def clear(self) -> None:
        self._relative = array("i")
        self._positions = array("i")

    def reset(self) -> None:
        """Empty both the file and the in-memory copy (before a rebuild)."""
        self.truncate_file()
        self.clear()

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position) of a batch start; ignored when full or not past the last entry."""
        rel = offset - self.base_offset
        if self.is_full or (self._relative and rel <= self._relative[-1]):
            return
        self._relative.append(rel)
        self._positions.append(position)
        self._buffer(_ENTRY.pack(rel, position))

    def lookup(self, offset: int) -> tuple[int, int]:
        """The floor entry (offset, position): the last indexed batch start at or before `offset`."""
        i = bisect_right(self._relative, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._relative[i], self._positions[i]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """The last indexed (offset, position) whose position is at or before `position`."""
        i = bisect_right(self._positions, position) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._relative[i], self._positions[i]

    def last_entry(self) -> tuple[int, int]:
        if not self._relative:
            return self.base_offset, 0
        return self.base_offset + self._relative[-1], self._positions[-1]
