"""TransactionIndex: the aborted transactions whose abort marker lies in one segment (`<base>.txnindex`).

Owns the file (its format, Kafka's TransactionIndex, is kafka_protocol.txn_index_format: the remote
segments' `.txnindex` objects that Spark executors read directly have it too), appends, truncation by offset, and the lookup Fetch needs under read_committed:
the aborted transactions overlapping a range of offsets. The file exists only once a segment holds
an abort; entries are read from disk on first lookup and kept (a segment rarely holds many).

Appends reach the page cache before `append` returns (os.pwrite), like the segment's batches; a
crash can lose the unflushed tail, which recovery rebuilds from the batches (the partition log
truncates the index to its replay start and appends again).
"""
from __future__ import annotations

import os
from pathlib import Path

from kafka_protocol.txn_index_format import ENTRY, ENTRY_SIZE, AbortedTxn, collect_entries, parse_entries

__all__ = ["AbortedTxn", "TransactionIndex", "parse_entries", "collect_entries"]


class TransactionIndex:
    """The aborted transactions of one segment, in the order of their markers."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None     # None: not read yet

    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        whole = len(data) - len(data) % ENTRY_SIZE
        out = parse_entries(data)
        if whole != len(data):          # a torn last entry (crash): cut it so appends stay aligned
            os.truncate(self.path, whole)
        return out

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"{self.path}: aborted transaction ending at {txn.last_offset} is not after "
                             f"the last one ({entries[-1].last_offset})")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, ENTRY.pack(0, txn.producer_id, txn.first_offset, txn.last_offset,
                                     txn.last_stable_offset))
        finally:
            os.close(fd)
        entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose marker is at or above `offset`."""
        entries = self.entries()
        kept = [e for e in entries if e.last_offset < offset]
        if len(kept) != len(entries) or (self.path.exists() and self.path.stat().st_size != len(kept) * ENTRY_SIZE):
            self._write_all(kept)

    def _write_all(self, entries: list[AbortedTxn]) -> None:
        if not entries:
            self.remove_file()
            self._entries = []
            return
        data = b"".join(ENTRY.pack(0, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
                        for e in entries)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.path)
        self._entries = list(entries)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), and whether the search may stop
        here (an entry's last stable offset reached `upper_bound`: no later segment can add one)."""
        return collect_entries(self.entries(), fetch_offset, upper_bound)

    def flush(self) -> None:
        if self._entries and self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename(self, new_path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, new_path)
        self.path = new_path

    def remove_file(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
