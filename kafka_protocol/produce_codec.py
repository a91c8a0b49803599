"""Produce v3-v9 request bodies and responses, hand-coded with struct. Sans I/O.

Owns the hot path of the broker's busiest API: `decode_produce` turns a request body into light
slotted objects whose record sets are memoryview slices of the frame (never copied here), and
`encode_produce_response` writes a complete response frame. Both are byte-for-byte equivalent to
kio's generated codecs for the same versions (tests/unit/test_produce_codec.py checks every
version); the attribute names match kio's entities so handlers need not care which decoded a
request. The client's side (the sink's own producer): `encode_produce_request` frames record sets
as pieces to send, without copying them. Never touches sockets or broker state.

Differences from kio, both in Kafka's favour: unknown tagged fields are skipped (Kafka ignores
them; kio rejects them), and null topic/partition arrays are malformed here (with kio they fail
later, in the handler; either way the connection is closed).
"""
from __future__ import annotations

import datetime
import struct
from functools import lru_cache
from typing import Sequence

from kafka_protocol.api_keys import ApiKey
from kafka_protocol.varint import read_uvarint, skip_tagged_fields, write_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PARTITION_V3 = struct.Struct(">ihqq")      # index, error code, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")     # + log start offset
_HEADER_V0 = struct.Struct(">ii")           # size, correlation id
_INDEX_AND_SIZE = struct.Struct(">ii")      # partition index, records length
_HEADER_V1 = struct.Struct(">iib")          # size, correlation id, empty tagged fields
_REQUEST_HEADER = struct.Struct(">ihhi")    # size, api key, api version, correlation id

MIN_VERSION = 3
MAX_VERSION = 9
FLEXIBLE_VERSION = 9


class ProduceDecodeError(ValueError):
    """The body is not a valid ProduceRequest of the given version."""


class PartitionProduceData:
    __slots__ = ("index", "records")

    def __init__(self, index: int, records: memoryview | None) -> None:
        self.index = index
        self.records = records


class TopicProduceData:
    __slots__ = ("name", "partition_data")

    def __init__(self, name: str, partition_data: list[PartitionProduceData]) -> None:
        self.name = name
        self.partition_data = partition_data


class ProduceRequestData:
    """A decoded ProduceRequest body; `records` are views into the request frame."""

    __slots__ = ("transactional_id", "acks", "timeout_ms", "topic_data")
    __flexible__: bool = False

    def __init__(self, transactional_id: str | None, acks: int, timeout_ms: int,
                 topic_data: list[TopicProduceData]) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topic_data = topic_data

    @property
    def timeout(self) -> datetime.timedelta:
        return datetime.timedelta(milliseconds=self.timeout_ms)


# --- decoding ----------------------------------------------------------------------------------

def _take(buf: memoryview, pos: int, n: int) -> int:
    end = pos + n
    if end > len(buf):
        raise ProduceDecodeError("field runs past the end of the request")
    return end


def _text(raw: memoryview) -> str:
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError:
        raise ProduceDecodeError("string is not valid UTF-8") from None


def _array_count(n: int, limit: int) -> None:
    if n < 0:
        raise ProduceDecodeError("null array where an array is required")
    if n > limit:
        raise ProduceDecodeError(f"array of {n} elements cannot fit in the request")


def _decode_legacy(buf: memoryview, pos: int) -> tuple[ProduceRequestData, int]:
    end = len(buf)
    p = _take(buf, pos, 2)
    (n,) = _I16.unpack_from(buf, pos)
    transactional_id = None
    if n >= 0:
        pos, p = p, _take(buf, p, n)
        transactional_id = _text(buf[pos:p])
    elif n != -1:
        raise ProduceDecodeError("negative string length")
    pos = _take(buf, p, 10)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, p)
    (n_topics,) = _I32.unpack_from(buf, p + 6)
    _array_count(n_topics, end - pos)
    topics = []
    for _ in range(n_topics):
        p = _take(buf, pos, 2)
        (n,) = _I16.unpack_from(buf, pos)
        if n < 0:
            raise ProduceDecodeError("null topic name")
        pos = _take(buf, p, n)
        name = _text(buf[p:pos])
        p = _take(buf, pos, 4)
        (n_parts,) = _I32.unpack_from(buf, pos)
        _array_count(n_parts, end - p)
        pos = p
        parts = []
        for _ in range(n_parts):
            p = _take(buf, pos, 8)
            index, size = _INDEX_AND_SIZE.unpack_from(buf, pos)
            if size < 0:
                if size != -1:
                    raise ProduceDecodeError("negative records length")
                parts.append(PartitionProduceData(index, None))
                pos = p
            else:
                pos = _take(buf, p, size)
                parts.append(PartitionProduceData(index, buf[p:pos]))
        topics.append(TopicProduceData(name, parts))
    return ProduceRequestData(transactional_id, acks, timeout_ms, topics), pos


def _decode_flexible(buf: memoryview, pos: int) -> tuple[ProduceRequestData, int]:
    # One-byte varints (lengths < 127, no tagged fields) are read inline: the common case.
    end = len(buf)
    if pos >= end:
        raise ProduceDecodeError("truncated request")
    n = buf[pos]
    n, pos = (n, pos + 1) if n < 0x80 else read_uvarint(buf, pos)
    transactional_id = None
    if n:
        p = _take(buf, pos, n - 1)
        transactional_id = _text(buf[pos:p])
        pos = p
    p = _take(buf, pos, 7) - 1     # acks, timeout and at least one byte of array length
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    n_topics = buf[p]
    n_topics, pos = (n_topics, p + 1) if n_topics < 0x80 else read_uvarint(buf, p)
    _array_count(n_topics - 1, end - pos)
    topics = []
    for _ in range(n_topics - 1):
        n = buf[pos] if pos < end else 0x80
        n, pos = (n, pos + 1) if n < 0x80 else read_uvarint(buf, pos)
        if n == 0:
            raise ProduceDecodeError("null topic name")
        p = pos + n - 1
        if p >= end:
            raise ProduceDecodeError("topic name runs past the end of the request")
        name = _text(buf[pos:p])
        n_parts = buf[p]
        n_parts, pos = (n_parts, p + 1) if n_parts < 0x80 else read_uvarint(buf, p)
        _array_count(n_parts - 1, end - pos)
        parts = []
        for _ in range(n_parts - 1):
            p = pos + 4                    # index, then at least one byte of records length
            if p >= end:
                raise ProduceDecodeError("partition data runs past the end of the request")
            (index,) = _I32.unpack_from(buf, pos)
            n, pos = read_uvarint(buf, p)
            if n == 0:
                parts.append(PartitionProduceData(index, None))
            else:
                p = pos + n - 1
                if p > end:
                    raise ProduceDecodeError("records run past the end of the request")
                parts.append(PartitionProduceData(index, buf[pos:p]))
                pos = p
            pos = pos + 1 if pos < end and buf[pos] == 0 else skip_tagged_fields(buf, pos)
        pos = pos + 1 if pos < end and buf[pos] == 0 else skip_tagged_fields(buf, pos)
        topics.append(TopicProduceData(name, parts))
    pos = pos + 1 if pos < end and buf[pos] == 0 else skip_tagged_fields(buf, pos)
    return ProduceRequestData(transactional_id, acks, timeout_ms, topics), pos


def decode_produce(frame: bytes | bytearray | memoryview, pos: int, version: int) -> tuple[ProduceRequestData, int]:
    """(body, end position) of the ProduceRequest body of `version` that starts at `pos`.

    Record sets are memoryview slices of `frame`: the caller keeps the frame alive and unchanged
    while it uses them. Raises ProduceDecodeError on anything malformed.
    """
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    if version >= FLEXIBLE_VERSION:
        return _decode_flexible(buf, pos)
    return _decode_legacy(buf, pos)


# --- encoding ----------------------------------------------------------------------------------

class PartitionResult:
    """One partition's outcome, as the response reports it."""

    __slots__ = ("index", "error_code", "base_offset", "log_append_time", "log_start_offset", "error_message",
                 "record_errors", "end_offset")

    def __init__(self, index: int, error_code: int, base_offset: int = -1, log_append_time: int = -1,
                 log_start_offset: int = -1, error_message: str | None = None,
                 record_errors: Sequence[tuple[int, str]] = (), end_offset: int = -1) -> None:
        self.index = index
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset
        self.error_message = error_message
        self.end_offset = end_offset     # the offset after the appended batches (not sent; acks=-1 waits for it)
        self.record_errors = record_errors   # (batch_index, message) per rejected record, KIP-467 (v8+)


@lru_cache(maxsize=4096)
def _string(s: str, flexible: bool) -> bytes:
    raw = s.encode()
    return (write_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _nullable_string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    raw = s.encode()
    return (write_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _record_errors(errors: Sequence[tuple[int, str]], flexible: bool) -> bytes:
    """The record_errors array of v8+: (batch_index int32, batch_index_error_message nullable string)."""
    if not errors:
        return b"\x01" if flexible else b"\x00\x00\x00\x00"
    out = bytearray(write_uvarint(len(errors) + 1) if flexible else _I32.pack(len(errors)))
    for index, message in errors:
        out += _I32.pack(index)
        out += _nullable_string(message, flexible)
        if flexible:
            out += b"\x00"
    return bytes(out)


def encode_produce_response(version: int, correlation_id: int,
                            topics: Sequence[tuple[str, Sequence[PartitionResult]]],
                            throttle_time_ms: int = 0) -> bytes:
    """A complete ProduceResponse frame (size prefix and response header included) of `version`."""
    flexible = version >= FLEXIBLE_VERSION
    out = bytearray(9 if flexible else 8)
    if flexible:
        out += write_uvarint(len(topics) + 1)
    else:
        out += _I32.pack(len(topics))
    partition = _PARTITION_V5 if version >= 5 else _PARTITION_V3
    with_errors = version >= 8
    for name, parts in topics:
        out += _string(name, flexible)
        out += write_uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts))
        for r in parts:
            if version >= 5:
                out += partition.pack(r.index, r.error_code, r.base_offset, r.log_append_time, r.log_start_offset)
            else:
                out += partition.pack(r.index, r.error_code, r.base_offset, r.log_append_time)
            if with_errors:
                out += _record_errors(r.record_errors, flexible)
                out += _nullable_string(r.error_message, flexible)
            if flexible:
                out += b"\x00"
        if flexible:
            out += b"\x00"
    out += _I32.pack(throttle_time_ms)
    if flexible:
        out += b"\x00"
        _HEADER_V1.pack_into(out, 0, len(out) - 4, correlation_id, 0)
    else:
        _HEADER_V0.pack_into(out, 0, len(out) - 4, correlation_id)
    return bytes(out)


# --- the client's side: a request frame around record sets that stay where they are -----------------

def encode_produce_request(version: int, correlation_id: int, client_id: str, acks: int, timeout_ms: int,
                           topics: Sequence[tuple[str, Sequence[tuple[int, bytes | memoryview]]]],
                           transactional_id: str | None = None) -> list[bytes | memoryview]:
    """A complete ProduceRequest frame of `version` (size prefix and request header v1/v2 included),
    as pieces to send in order: the record sets are passed through, never copied."""
    flexible = version >= FLEXIBLE_VERSION
    raw_id = client_id.encode()
    head = bytearray(_REQUEST_HEADER.pack(0, ApiKey.PRODUCE, version, correlation_id))   # size filled in below
    head += _I16.pack(len(raw_id)) + raw_id
    if flexible:
        head += b"\x00"                          # request header v2: no tagged fields
    head += _nullable_string(transactional_id, flexible) + _ACKS_TIMEOUT.pack(acks, timeout_ms)
    head += write_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    parts: list[bytes | memoryview] = []
    pending = head
    for name, partitions in topics:
        pending += _string(name, flexible)
        pending += write_uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for index, records in partitions:
            pending += _I32.pack(index)
            pending += write_uvarint(len(records) + 1) if flexible else _I32.pack(len(records))
            parts.append(bytes(pending))
            parts.append(records)
            pending = bytearray(b"\x00" if flexible else b"")
        if flexible:
            pending += b"\x00"
    if flexible:
        pending += b"\x00"
    parts.append(bytes(pending))
    size = sum(len(p) for p in parts) - 4
    first = bytearray(parts[0])
    _I32.pack_into(first, 0, size)
    parts[0] = bytes(first)
    return [p for p in parts if len(p)]
