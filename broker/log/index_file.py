"""The file handling shared by the offset index and the time index: one append-only file of entries.

Owns: opening the index file for appends lazily, buffering new entries until `write_pending`,
reading the whole file for a load, truncation, fsync, rename and removal. Never interprets entries:
`OffsetIndex` and `TimeIndex` define the entry format, the in-memory copy and lookups.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import ClassVar

log = logging.getLogger(__name__)


class IndexFile:
    """Base class: an append-only file of fixed-size entries whose in-memory copy the subclass keeps."""

    entry_size: ClassVar[int]

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.entry_size)
        self._fd: int | None = None
        self._pending = bytearray()

    def file_looks_valid(self) -> bool:
        """The file exists and holds a whole number of entries (a stat, no read)."""
        try:
            return self.path.stat().st_size % self.entry_size == 0
        except FileNotFoundError:
            return False

    def _read_file(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""

    def _buffer(self, entry: bytes) -> None:
        self._pending += entry

    def write_pending(self) -> None:
        """Append buffered entries to the file (page cache; `flush` makes them durable)."""
        if not self._pending:
            return
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        data = memoryview(self._pending)
        while data:
            n = os.write(self._fd, data)
            data = data[n:]
        data.release()
        self._pending.clear()

    def flush(self) -> None:
        self.write_pending()
        if self._fd is not None:
            os.fsync(self._fd)

    def truncate_file(self) -> None:
        """Empty the file (creating it if missing) and drop buffered entries."""
        self._pending.clear()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.close(fd)

    def close(self) -> None:
        self.write_pending()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename(self, new_path: Path) -> None:
        self.write_pending()
        if self.path.exists():
            os.replace(self.path, new_path)
        self.path = new_path

    def remove_file(self) -> None:
        self._pending.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
