"""Record batch v2 encoding and full record decoding, for the broker's own records.

Owns: building real v2 batches (varint records, CRC32C) from (key, value, timestamp) records, as
the broker writes them into internal topics (`__consumer_offsets`) and as the log cleaner rewrites
compacted batches; and decoding every record of a batch (keys, values, headers) for loading those
topics and for compaction. `encode_batch` is built from two steps that are public for callers that
shape batches themselves (the tests' and benchmarks' encoders, which add compression and flags):
`encode_record` (one record) and `frame_batch` (header and CRC32C around encoded records).

Never used on the produce/fetch hot path: client batches stay opaque bytes (see record_batch.py).
Knows nothing about files or the network protocol.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import crc32c

from kafka_protocol.errors import CorruptRecordError
from kafka_protocol.record_batch import CURRENT_MAGIC, HEADER_SIZE
from kafka_protocol.record_batch import decompress, parse_header

__all__ = ["Record", "zigzag_varint", "encode_record", "frame_batch", "encode_batch", "decode_records", "iter_batches"]

_AFTER_CRC = struct.Struct(">hiqqqhii")   # attributes .. recordsCount
_BEFORE_CRC = struct.Struct(">qiibI")     # baseOffset, batchLength, leaderEpoch, magic, crc
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
NO_PRODUCER_ID = -1


@dataclass(slots=True)
class Record:
    """One record with its absolute offset and timestamp. `value is None` is a tombstone."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = field(default_factory=tuple)


def zigzag_varint(value: int) -> bytes:
    """A signed varint as the records of a v2 batch hold them (zigzag, then 7 bits a byte)."""
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _bytes_field(b: bytes | None) -> bytes:
    return zigzag_varint(-1) if b is None else zigzag_varint(len(b)) + b


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: Sequence[tuple[str, bytes | None]] = ()) -> bytes:
    """One length-prefixed record of a v2 batch; offset and timestamp are deltas from the batch's bases."""
    body = bytearray(b"\x00")
    body += zigzag_varint(timestamp_delta)
    body += zigzag_varint(offset_delta)
    body += _bytes_field(key)
    body += _bytes_field(value)
    body += zigzag_varint(len(headers))
    for hk, hv in headers:
        body += _bytes_field(hk.encode())
        body += _bytes_field(hv)
    return zigzag_varint(len(body)) + bytes(body)


def frame_batch(records: bytes, count: int, *, base_offset: int, last_offset_delta: int, base_timestamp: int,
                max_timestamp: int, attributes: int = 0, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1,
                base_sequence: int = -1, partition_leader_epoch: int = -1) -> bytes:
    """A v2 batch around `count` encoded records (compressed if `attributes` names a codec), with its CRC32C."""
    after_crc = _AFTER_CRC.pack(attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
                                producer_epoch, base_sequence, count) + records
    batch_length = 4 + 1 + 4 + len(after_crc)
    return _BEFORE_CRC.pack(base_offset, batch_length, partition_leader_epoch, CURRENT_MAGIC,
                            crc32c.crc32c(after_crc)) + after_crc


def encode_batch(records: Sequence[Record], *, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1,
                 base_sequence: int = -1, log_append_time: bool = False, partition_leader_epoch: int = -1,
                 transactional: bool = False) -> bytes:
    """One uncompressed v2 batch; its base offset is the first record's offset (deltas preserved)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_offset = records[0].offset
    base_ts = min(r.timestamp for r in records)
    payload = b"".join(encode_record(r.offset - base_offset, r.timestamp - base_ts, r.key, r.value, r.headers)
                       for r in records)
    return frame_batch(payload, len(records), base_offset=base_offset,
                       last_offset_delta=records[-1].offset - base_offset,
                       base_timestamp=base_ts, max_timestamp=max(r.timestamp for r in records),
                       attributes=(_TIMESTAMP_TYPE_BIT if log_append_time else 0)
                       | (_TRANSACTIONAL_BIT if transactional else 0), producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=base_sequence,
                       partition_leader_epoch=partition_leader_epoch)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def varint(self) -> int:
        result = shift = 0
        buf = self.buf
        while True:
            if self.pos >= len(buf):
                raise CorruptRecordError("record is truncated inside a varint")
            b = buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7
            if shift > 63:
                raise CorruptRecordError("varint is longer than 10 bytes")

    def bytes_field(self) -> bytes | None:
        n = self.varint()
        if n < 0:
            return None
        end = self.pos + n
        if end > len(self.buf):
            raise CorruptRecordError("record field runs past the end of its batch")
        out = self.buf[self.pos:end]
        self.pos = end
        return out


def decode_records(batch: bytes | bytearray | memoryview) -> list[Record]:
    """Every record of one whole v2 batch, decompressed, with absolute offsets and timestamps."""
    h = parse_header(batch)
    data = decompress(h.compression, bytes(batch[HEADER_SIZE:h.size]))
    reader = _Reader(data)
    log_append_time = h.timestamp_type == 1
    out: list[Record] = []
    for _ in range(h.records_count):
        length = reader.varint()
        end = reader.pos + length
        if length < 0 or end > len(data):
            raise CorruptRecordError(f"record in batch at offset {h.base_offset} is truncated")
        reader.pos += 1  # attributes
        ts_delta = reader.varint()
        offset_delta = reader.varint()
        key = reader.bytes_field()
        value = reader.bytes_field()
        headers = []
        for _ in range(reader.varint()):
            hk = reader.bytes_field()
            headers.append(((hk or b"").decode("utf-8", "replace"), reader.bytes_field()))
        reader.pos = end
        ts = h.max_timestamp if log_append_time else h.base_timestamp + ts_delta
        out.append(Record(h.base_offset + offset_delta, ts, key, value, tuple(headers)))
    return out


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, int]]:
    """(position, size) of each whole batch in `buf`; a trailing partial batch is ignored."""
    pos = 0
    total = len(buf)
    while pos + HEADER_SIZE <= total:
        h = parse_header(buf, pos)
        if pos + h.size > total:
            return
        yield pos, h.size
        pos += h.size
