"""The Fetch response on the wire, both ways, with record sets never copied. Sans I/O.

Fetch is the one response not built or read through kio, because of its record sets:
- the broker's `encode_fetch_response` returns a list of chunks, each either `bytes` or a
  `FileRegion` of a segment file that the server sends with `os.sendfile`; their concatenation is
  the complete response frame (size prefix included);
- the Spark source's client reads a response with `decode_fetch_response`, whose record sets are
  `memoryview` slices of the received frame, handed to the native decoder as they are.
Covers Fetch v4-v12 (v12 is the first flexible version). The decoder trusts no length: every one is
checked against the bytes left, and a malformed response raises `FetchResponseError`.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Protocol, Sequence, Union

from kafka_protocol.varint import VarintError, read_uvarint, skip_tagged_fields, write_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PARTITION_HEAD = struct.Struct(">ihqqq")  # index, error, high watermark, last stable offset, log start offset


class FileRegion(Protocol):
    @property
    def fd(self) -> int: ...

    @property
    def position(self) -> int: ...

    @property
    def length(self) -> int: ...


Chunk = Union[bytes, FileRegion]


@dataclass(slots=True)
class PartitionData:
    index: int
    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileRegion | bytes | None = None
    aborted_transactions_null: bool = True    # read_uncommitted: Kafka sends null, read_committed: a list
    aborted_transactions: Sequence[tuple[int, int]] = ()   # (producer id, first offset), read_committed
    preferred_read_replica: int = -1          # KIP-392: the replica a consumer should fetch from instead (v11+)


def _string(s: str, flexible: bool) -> bytes:
    raw = s.encode()
    return (write_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _array_len(n: int, flexible: bool) -> bytes:
    return write_uvarint(n + 1) if flexible else _I32.pack(n)


def records_length(records: FileRegion | bytes | None) -> int:
    """Bytes of a partition's record set (-1 for null), whether bytes or a file region."""
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
            if version < 5:
                del head[-8:]  # log start offset: v5+
            # aborted transactions: null for read_uncommitted, as Kafka
            if p.aborted_transactions_null:
                head += _array_len(-1, flexible)
            else:
                head += _array_len(len(p.aborted_transactions), flexible)
                for producer_id, first_offset in p.aborted_transactions:
                    head += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        head += b"\x00"
            if version >= 11:
                head += _I32.pack(p.preferred_read_replica)
            n = records_length(p.records)
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


class FetchResponseError(ValueError):
    """A Fetch response that does not follow the schema of its version."""


@dataclass(slots=True)
class FetchedPartition:
    """One partition of a decoded Fetch response; `records` is a view into the response frame."""

    topic: str
    index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[tuple[int, int]]   # (producer id, first offset), read_committed only
    records: memoryview | None
    preferred_read_replica: int = -1              # KIP-392: fetch from this replica instead (none: -1)


@dataclass(slots=True)
class FetchResponse:
    throttle_time_ms: int
    error_code: int
    session_id: int
    partitions: list[FetchedPartition]


class _Cursor:
    """Bounds-checked reads over one response body."""

    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: memoryview, pos: int, flexible: bool) -> None:
        self.buf, self.pos, self.flexible = buf, pos, flexible

    def _take(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > len(self.buf):
            raise FetchResponseError(f"{n} bytes needed at byte {start} of a {len(self.buf)}-byte response")
        self.pos += n
        return start

    def unpack(self, fmt: struct.Struct) -> tuple[Any, ...]:
        return fmt.unpack_from(self.buf, self._take(fmt.size))

    def _length(self, width: int) -> int:
        """A length prefix: compact (uvarint of n + 1) when flexible, else int16 or int32 (`width`
        bytes); -1 for null."""
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos)
            return int(n) - 1
        return int(self.unpack(_I16 if width == 2 else _I32)[0])

    def string(self) -> str:
        n = self._length(2)
        if n < 0:
            raise FetchResponseError(f"null topic name at byte {self.pos}")
        start = self._take(n)
        return str(self.buf[start:start + n], "utf-8")

    def array_len(self, element_bytes: int) -> int:
        n = self._length(4)
        if n > (len(self.buf) - self.pos) // max(element_bytes, 1):
            raise FetchResponseError(f"an array of {n} elements cannot fit in the response at byte {self.pos}")
        return n

    def records(self) -> memoryview | None:
        n = self._length(4)
        if n < 0:
            return None
        start = self._take(n)
        return self.buf[start:start + n]

    def tagged_fields(self) -> None:
        if self.flexible:
            self.pos = skip_tagged_fields(self.buf, self.pos)


_THROTTLE = struct.Struct(">i")
_SESSION = struct.Struct(">hi")
_PARTITION_V4 = struct.Struct(">ihqq")   # index, error, high watermark, last stable offset
_ABORTED = struct.Struct(">qq")          # producer id, first offset


def decode_fetch_response(body: memoryview, version: int) -> FetchResponse:
    """A Fetch response body (after the response header) of `version` 4-12."""
    if not 4 <= version <= 12:
        raise FetchResponseError(f"Fetch v{version} responses are not supported (v4-v12 are)")
    c = _Cursor(body, 0, version >= 12)
    try:
        (throttle,) = c.unpack(_THROTTLE)
        error_code, session_id = c.unpack(_SESSION) if version >= 7 else (0, 0)
        partitions: list[FetchedPartition] = []
        for _ in range(max(c.array_len(2), 0)):
            topic = c.string()
            for _ in range(max(c.array_len(_PARTITION_V4.size), 0)):
                index, error, high, stable = c.unpack(_PARTITION_V4)
                log_start = c.unpack(_I64)[0] if version >= 5 else -1
                aborted: list[tuple[int, int]] = []
                for _ in range(max(c.array_len(_ABORTED.size), 0)):
                    aborted.append(c.unpack(_ABORTED))
                    c.tagged_fields()
                preferred = c.unpack(_I32)[0] if version >= 11 else -1
                records = c.records()
                c.tagged_fields()
                partitions.append(FetchedPartition(topic, index, error, high, stable, log_start, aborted, records,
                                                   preferred))
            c.tagged_fields()
        c.tagged_fields()
    except (struct.error, VarintError, UnicodeDecodeError) as e:
        raise FetchResponseError(f"malformed Fetch v{version} response: {e}") from None
    return FetchResponse(throttle, error_code, session_id, partitions)
