"""Fetch response encoding that leaves record data in files. Sans I/O.

Fetch is the one response not built through kio: its record sets are regions of segment files that
the server sends with `os.sendfile`. `encode_fetch_response` returns a list of chunks, each either
`bytes` or a `FileRegion`, whose concatenation is the complete response frame (size prefix included).
Covers Fetch v4-v12 (v12 is the first flexible version).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Protocol, Sequence, Union

from broker.protocol.varint import write_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PARTITION_HEAD = struct.Struct(">ihqqq")  # index, error, high watermark, last stable offset, log start offset


class FileRegion(Protocol):
    fd: int
    position: int
    length: int


Chunk = Union[bytes, FileRegion]


@dataclass(slots=True)
class PartitionData:
    index: int
    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileRegion | bytes | None = None


def _string(s: str, flexible: bool) -> bytes:
    raw = s.encode()
    return (write_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _array_len(n: int, flexible: bool) -> bytes:
    return write_uvarint(n + 1) if flexible else _I32.pack(n)


def _records_len(records: FileRegion | bytes | None) -> int:
    if records is None:
        return -1
    return len(records) if isinstance(records, (bytes, bytearray, memoryview)) else records.length


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: Sequence[tuple[str, Sequence[PartitionData]]],
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> list[Chunk]:
    flexible = version >= 12
    chunks: list[Chunk] = []
    head = bytearray(_I32.pack(correlation_id))
    if flexible:
        head += b"\x00"  # response header v1 tagged fields
    head += _I32.pack(throttle_time_ms)
    if version >= 7:
        head += _I16.pack(error_code) + _I32.pack(session_id)
    head += _array_len(len(topics), flexible)
    for name, partitions in topics:
        head += _string(name, flexible)
        head += _array_len(len(partitions), flexible)
        for p in partitions:
            head += _PARTITION_HEAD.pack(p.index, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset)
            head += _array_len(0, flexible)  # aborted transactions: none (no transactions)
            if version >= 11:
                head += _I32.pack(-1)  # preferred read replica
            n = _records_len(p.records)
            if flexible:
                head += write_uvarint(n + 1)
            else:
                head += _I32.pack(n)
            if n > 0:
                chunks.append(bytes(head))
                chunks.append(p.records)  # type: ignore[arg-type]
                head = bytearray()
            if flexible:
                head += b"\x00"  # partition tagged fields
        if flexible:
            head += b"\x00"  # topic tagged fields
    if flexible:
        head += b"\x00"  # response tagged fields
    chunks.append(bytes(head))
    total = sum(len(c) if isinstance(c, (bytes, bytearray)) else c.length for c in chunks)
    return [_I32.pack(total), *chunks]
