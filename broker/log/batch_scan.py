"""Scanning a segment file's record batches: recovery and index rebuilds read headers with pread.

Owns walking the batches of a file range, by header only (`iter_headers`, trusted files) or checked
(`scan_valid_prefix`: length, magic, CRC32C, offsets increasing; where valid data ends and why). The
format itself is kafka_protocol.record_batch's.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterator

import crc32c

from broker.log.constants import HEADER_WINDOW_BYTES, RECOVERY_CHUNK_BYTES
from kafka_protocol.record_batch import (
    CRC_START,
    CURRENT_MAGIC,
    HEADER_SIZE,
    MIN_BATCH_LENGTH,
    BatchHeader,
    unpack_header,
)


def iter_headers(fd: int, start: int, end: int, window: int = HEADER_WINDOW_BYTES) -> Iterator[BatchHeader]:
    """Headers of the batches in file range [start, end), read with pread in windows; no CRC check.

    Stops quietly at a header that is truncated or whose length is not sane (trusted files only).
    """
    pos = start
    buf = b""
    buf_start = start
    while pos + HEADER_SIZE <= end:
        rel = pos - buf_start
        if rel < 0 or rel + HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(window, end - pos), pos)
            buf_start, rel = pos, 0
            if len(buf) < HEADER_SIZE:
                return
        h = unpack_header(buf, rel, pos)
        if h.batch_length < MIN_BATCH_LENGTH or pos + h.size > end:
            return
        yield h
        pos += h.size


@dataclass(slots=True)
class ScanResult:
    """Outcome of `scan_valid_prefix`: where valid data ends and why the scan stopped."""

    valid_end: int
    batches: int
    next_offset: int          # last valid batch's last offset + 1 (or the `min_offset` given)
    stop_reason: str | None   # None when the whole range was valid


def scan_valid_prefix(fd: int, start: int, end: int, *, min_offset: int,
                      on_batch: Callable[[BatchHeader], None] | None = None,
                      chunk_size: int = RECOVERY_CHUNK_BYTES) -> ScanResult:
    """Validate batches in [start, end) of a file: length, magic 2, CRC32C, offsets increasing.

    Reads in big chunks; calls `on_batch` for each valid batch; stops at the first invalid one.
    `min_offset` is the smallest base offset the first batch may have (the segment's base offset).
    """
    buf = bytearray(max(min(chunk_size, end - start), HEADER_SIZE))
    view = memoryview(buf)
    buf_start, buf_len = start, 0
    pos, count, next_offset = start, 0, min_offset
    reason: str | None = None
    while pos < end:
        if end - pos < HEADER_SIZE:
            reason = f"{end - pos} trailing bytes are too short for a batch header"
            break
        rel = pos - buf_start
        if rel + HEADER_SIZE > buf_len:
            view.release()
            buf_start, rel = pos, 0
            buf_len = _fill(fd, buf, pos, end)
            view = memoryview(buf)
            if buf_len < HEADER_SIZE:
                reason = "the file is shorter than expected"
                break
        h = unpack_header(view, rel, pos)
        reason = _header_problem(h, end - pos, next_offset)
        if reason is not None:
            break
        if rel + h.size > buf_len:
            view.release()
            if h.size > len(buf):
                buf = bytearray(h.size)
            buf_start, rel = pos, 0
            buf_len = _fill(fd, buf, pos, end)
            view = memoryview(buf)
            if buf_len < h.size:
                reason = "batch is truncated"
                break
        if crc32c.crc32c(view[rel + CRC_START:rel + h.size]) != h.crc:
            reason = f"CRC32C mismatch in batch at offset {h.base_offset}"
            break
        if on_batch is not None:
            on_batch(h)
        count += 1
        next_offset = h.last_offset + 1
        pos += h.size
    view.release()
    return ScanResult(pos, count, next_offset, reason)


def _fill(fd: int, buf: bytearray, pos: int, end: int) -> int:
    """Read up to len(buf) bytes at `pos` (not past `end`) into buf; return bytes read."""
    want = min(len(buf), end - pos)
    got = 0
    view = memoryview(buf)
    while got < want:
        n = os.preadv(fd, [view[got:want]], pos + got)
        if n == 0:
            break
        got += n
    view.release()
    return got


def _header_problem(h: BatchHeader, remaining: int, next_offset: int) -> str | None:
    if h.batch_length < MIN_BATCH_LENGTH:
        return f"invalid batch length {h.batch_length}"
    if h.size > remaining:
        return f"batch of {h.size} bytes is truncated ({remaining} bytes left)"
    if h.magic != CURRENT_MAGIC:
        return f"invalid magic {h.magic}"
    if h.last_offset_delta < 0 or h.records_count < 0:
        return f"invalid last offset delta {h.last_offset_delta} / count {h.records_count}"
    if h.base_offset < next_offset:
        return f"offset {h.base_offset} is not above the previous batch's last offset {next_offset - 1}"
    return None
