"""LogSegment: one `.log` file of record batches plus its `.index`, `.timeindex` and `.txnindex`.

Owns: appending already-validated, offset-assigned batches with os.pwrite (in the page cache, so
they survive kill -9, before `append` returns); index entries every `index.interval.bytes`; finding
the batch that holds an offset or a timestamp; slicing whole batches for Fetch; recovery (validate
batch by batch, truncate at the first bad one, rebuild indexes); fsync; Kafka-style deletion
(rename to `*.deleted`, keep the fd so in-flight reads still work, unlink later).

Invariants: `size` is the number of bytes of whole, appended batches; nothing past it is ever
read. One read/write fd stays open per segment (Fetch calls os.sendfile on it). Indexes of sealed
segments load lazily on first lookup and are released again (`release_indexes`) when unused for a
while, as Kafka's LazyIndex: memory follows the segments being read, not all of them. Never
validates CRCs outside recovery, never knows about producers, retention or the network.
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Iterator

from broker.log.constants import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file_name,
)
from kafka_protocol.record_batch import HEADER_SIZE, INT32_MAX
from broker.log.offset_index import OffsetIndex
from kafka_protocol.record_batch import BatchHeader, iter_record_timestamps, parse_header
from broker.log.batch_scan import iter_headers, scan_valid_prefix
from broker.log.time_index import TimeIndex
from broker.log.transaction_index import TransactionIndex

log = logging.getLogger(__name__)


class LogSegment:
    """A segment of a partition's log, named by its base offset."""

    def __init__(self, directory: Path, base_offset: int, *, index_interval_bytes: int,
                 max_index_bytes: int, roll_jitter_ms: int = 0) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.log_path = directory / offset_file_name(base_offset, LOG_SUFFIX)
        self.offset_index = OffsetIndex(directory / offset_file_name(base_offset, INDEX_SUFFIX),
                                        base_offset, max_index_bytes)
        self.time_index = TimeIndex(directory / offset_file_name(base_offset, TIME_INDEX_SUFFIX),
                                    base_offset, max_index_bytes)
        self.txn_index = TransactionIndex(directory / offset_file_name(base_offset, TXN_INDEX_SUFFIX))
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.first_append_ms: int | None = None   # drives segment.ms rolling
        self.dirty = False                         # appended since the last fsync
        self.deleted = False
        self._loaded = False
        self.last_used = 0.0                       # monotonic time of the last index lookup
        self._next_offset: int | None = None
        self._max_timestamp = -1
        self._offset_of_max_timestamp = base_offset
        self._bytes_since_index = 0
        self._last_entry_cache: tuple[int, int] | None = None

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size})"

    # --- loading and recovery ---------------------------------------------------------------

    def indexes_missing(self) -> bool:
        """True if either index file is absent or holds a partial entry (a stat each, no read)."""
        return not (self.offset_index.file_looks_valid() and self.time_index.file_looks_valid())

    def ensure_loaded(self) -> None:
        """Load both indexes (rebuilding them from the log if corrupt); idempotent."""
        self.last_used = time.monotonic()
        if self._loaded:
            return
        if self.size == 0:                 # a new (or emptied) segment: fresh, empty indexes
            self._reset_index_state()
            self._loaded = True
            return
        ok = (not self.indexes_missing() and self.offset_index.load(self.size)
              and self.time_index.load())
        if ok:
            self._max_timestamp, self._offset_of_max_timestamp = self.time_index.last_entry()
            self._loaded = True
        else:
            log.warning("rebuilding indexes of %s", self.log_path)
            self.rebuild_indexes()

    def rebuild_indexes(self) -> None:
        """Rewrite both indexes from the batch headers of the log (trusted: no CRC check)."""
        self._reset_index_state()
        for h in iter_headers(self.fd, 0, self.size):
            self._index_batch(h, h.position)
        self._seal_time_index()
        self._loaded = True

    def recover(self) -> int:
        """Validate every batch, truncate at the first invalid one, rebuild indexes; bytes cut."""
        self._reset_index_state()
        result = scan_valid_prefix(self.fd, 0, self.size, min_offset=self.base_offset,
                                   on_batch=lambda h: self._index_batch(h, h.position))
        truncated = self.size - result.valid_end
        if truncated:
            log.warning("truncating %s at position %d (%d bytes dropped): %s",
                        self.log_path, result.valid_end, truncated, result.stop_reason)
            self.truncate_to(result.valid_end)
        self._next_offset = result.next_offset
        self._seal_time_index()
        self._loaded = True
        return truncated

    def load_tail(self) -> None:
        """Trusted open of the active segment: learn the next offset and max timestamp cheaply."""
        self.ensure_loaded()
        next_offset, pos = self.offset_index.last_entry()    # (base offset, 0) when empty
        end = pos
        for h in iter_headers(self.fd, pos, self.size):
            if h.magic != 2 or h.base_offset < next_offset:
                break
            if h.max_timestamp > self._max_timestamp:
                self._max_timestamp, self._offset_of_max_timestamp = h.max_timestamp, h.base_offset
            next_offset = h.last_offset + 1
            end = h.position + h.size
        if end < self.size:
            log.warning("%s has %d unreadable bytes after position %d; truncating",
                        self.log_path, self.size - end, end)
            self.truncate_to(end)
        self._next_offset = next_offset
        self._bytes_since_index = self.size - pos

    def restore_roll_clock(self, now_ms: int) -> None:
        """After a restart, date a non-empty segment by its first batch's timestamp (as Kafka does)."""
        if self.size == 0 or self.first_append_ms is not None:
            return
        first = parse_header(os.pread(self.fd, HEADER_SIZE, 0))
        ts = first.max_timestamp
        self.first_append_ms = ts if 0 <= ts <= now_ms else now_ms

    def _reset_index_state(self) -> None:
        self.offset_index.reset()
        self.time_index.reset()
        self._max_timestamp = -1
        self._offset_of_max_timestamp = self.base_offset
        self._bytes_since_index = 0
        self._next_offset = self.base_offset

    def _index_batch(self, h: BatchHeader, position: int) -> None:
        """Per-batch bookkeeping on append and rebuild; adds index entries every index interval."""
        if h.max_timestamp > self._max_timestamp:
            self._max_timestamp = h.max_timestamp
            self._offset_of_max_timestamp = h.base_offset
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(h.base_offset, position)
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += h.size
        self._next_offset = h.last_offset + 1

    def _seal_time_index(self) -> None:
        self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True)
        self.offset_index.write_pending()
        self.time_index.write_pending()

    def truncate_to(self, size: int) -> None:
        os.ftruncate(self.fd, size)
        self.size = size

    def truncate_to_offset(self, offset: int) -> int:
        """Remove every batch whose last offset is >= `offset` (whole batches, as Kafka's
        LogSegment.truncateTo), and the index entries pointing at them; returns the new next offset.

        For a replica's truncation (rare): the indexes are rebuilt from the batches that remain.
        The segment becomes the active one again (its index files reopen for appends).
        """
        cut = self.find_batch(offset)
        if cut is None:
            return self.next_offset
        log.info("truncating %s at position %d (offset %d; %d bytes dropped)",
                 self.log_path, cut.position, cut.base_offset, self.size - cut.position)
        self.truncate_to(cut.position)
        self.rebuild_indexes()
        self._last_entry_cache = None
        self.dirty = True
        if self.size == 0:
            self.first_append_ms = None
        return self.next_offset

    # --- appending -----------------------------------------------------------------------------

    def append(self, buf: bytes | bytearray | memoryview, headers: list[BatchHeader], now_ms: int) -> None:
        """Write whole batches at the end of the file; headers' positions are relative to `buf`."""
        if not self._loaded:
            self.ensure_loaded()
        start = self.size
        total = len(buf)
        try:
            written = os.pwrite(self.fd, buf, start)
            if written < total:                        # rare: a short write; finish it
                with memoryview(buf) as view:
                    while written < total:
                        written += os.pwrite(self.fd, view[written:], start + written)
        except OSError:
            os.ftruncate(self.fd, start)
            raise
        entries = len(self.offset_index) + len(self.time_index)
        for h in headers:
            self._index_batch(h, start + h.position)
        self.size = start + written
        if len(self.offset_index) + len(self.time_index) != entries:   # due every index.interval.bytes
            self.offset_index.write_pending()
            self.time_index.write_pending()
        if self.first_append_ms is None:
            self.first_append_ms = now_ms
        self.dirty = True

    @property
    def next_offset(self) -> int:
        """Last offset in this segment + 1 (the base offset when empty)."""
        if self._next_offset is None:
            self.load_tail()
        assert self._next_offset is not None
        return self._next_offset

    @property
    def index_is_full(self) -> bool:
        self.ensure_loaded()
        return self.offset_index.is_full or self.time_index.is_full

    def offset_would_overflow(self, last_offset: int) -> bool:
        return last_offset - self.base_offset > INT32_MAX

    # --- reading ----------------------------------------------------------------------------

    def iter_headers(self, start: int = 0) -> Iterator[BatchHeader]:
        return iter_headers(self.fd, start, self.size)

    def find_batch(self, offset: int) -> BatchHeader | None:
        """The first batch whose last offset is >= `offset`, or None if `offset` is past this segment."""
        self.ensure_loaded()
        _, pos = self.offset_index.lookup(offset)
        for h in iter_headers(self.fd, pos, self.size):
            if h.last_offset >= offset:
                return h
        return None

    def read_slice(self, offset: int, max_bytes: int, min_one_batch: bool) -> tuple[int, int] | None:
        """(position, length) of whole batches from the one holding `offset`, at most `max_bytes`.

        KIP-74: a first batch larger than `max_bytes` is returned whole if `min_one_batch`.
        None when `offset` is past the last batch of this segment.
        """
        first = self.find_batch(offset)
        if first is None:
            return None
        start = first.position
        if first.size > max_bytes:
            return start, first.size if min_one_batch else 0
        limit = min(start + max_bytes, self.size)
        _, indexed = self.offset_index.lookup_position(limit)
        end = max(indexed, start + first.size)
        for h in iter_headers(self.fd, end, self.size):
            if h.position + h.size > limit:
                break
            end = h.position + h.size
        return start, end - start

    def read_batch(self, h: BatchHeader) -> bytes:
        return os.pread(self.fd, h.size, h.position)

    @property
    def largest_timestamp(self) -> int:
        return self._largest()[0]

    @property
    def offset_of_largest_timestamp(self) -> int:
        """Base offset of the batch holding the largest timestamp."""
        return self._largest()[1]

    def _largest(self) -> tuple[int, int]:
        if self._loaded:
            return self._max_timestamp, self._offset_of_max_timestamp
        if self._last_entry_cache is None:
            self._last_entry_cache = self.time_index.read_last_entry()
        return self._last_entry_cache

    def last_modified_ms(self) -> int:
        return int(os.fstat(self.fd).st_mtime * 1000)

    def find_timestamp(self, target: int, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `min_offset` with timestamp >= target."""
        if self.largest_timestamp < target:
            return None
        self.ensure_loaded()
        start_offset = max(self.time_index.lookup(target), min_offset)
        _, pos = self.offset_index.lookup(start_offset)
        for h in iter_headers(self.fd, pos, self.size):
            if h.last_offset < min_offset or h.max_timestamp < target or h.is_control:
                continue
            for off, ts in iter_record_timestamps(self.read_batch(h)):
                if off >= min_offset and ts >= target:
                    return off, ts
        return None

    def record_with_timestamp(self, timestamp: int, batch_offset: int) -> int:
        """Exact offset of the first record with `timestamp` in the batch at `batch_offset`."""
        h = self.find_batch(batch_offset)
        if h is None:
            return batch_offset
        for off, ts in iter_record_timestamps(self.read_batch(h)):
            if ts == timestamp:
                return off
        return h.last_offset

    # --- lifecycle ----------------------------------------------------------------------------

    def seal(self) -> None:
        """The segment stops being active: final time index entry, index files closed for writing."""
        if self._loaded:
            self._seal_time_index()
        self.offset_index.close()
        self.time_index.close()

    def release_indexes(self) -> bool:
        """Drop a sealed segment's in-memory indexes (they load again on the next lookup).

        Only for segments that are no longer appended to; True if memory was released.
        """
        if not self._loaded:
            return False
        self.seal()
        self._last_entry_cache = (self._max_timestamp, self._offset_of_max_timestamp)
        self.offset_index.clear()
        self.time_index.clear()
        self._loaded = False
        return True

    def flush(self) -> None:
        if self.dirty:
            os.fsync(self.fd)
            self.dirty = False
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        self.seal()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def mark_deleted(self) -> None:
        """Rename the files to `*.deleted`; the fd stays open for in-flight reads until `remove_files`."""
        self.seal()
        for path_holder in (self.offset_index, self.time_index):
            path_holder.rename(path_holder.path.with_name(path_holder.path.name + DELETED_SUFFIX))
        self.txn_index.rename(self.txn_index.path.with_name(self.txn_index.path.name + DELETED_SUFFIX))
        deleted = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        os.replace(self.log_path, deleted)
        self.log_path = deleted
        self.deleted = True

    def remove_files(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.offset_index.remove_file()
        self.time_index.remove_file()
        self.txn_index.remove_file()
        try:
            self.log_path.unlink()
        except FileNotFoundError:
            pass
