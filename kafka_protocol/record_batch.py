"""Kafka record batch v2: the on-disk and wire format, read and rewritten at the header level.

Owns: the format's layout constants, parsing batch headers, validating a produce request's batches
(length, magic, CRC32C, size here; every record, as Kafka's LogValidator does, in the native
`pylog_native.validate_batches`), assigning offsets / LogAppendTime / the true max timestamp by
rewriting headers in place, and decoding record timestamps for ListOffsets-by-timestamp. Scanning a
segment file's batches is the broker's storage (broker/log/batch_scan.py).

Records are walked once on produce, in native code; `assign_offsets` touches headers only;
`iter_record_timestamps` is for off-hot-path lookups. No I/O.

Header layout (big-endian):
  baseOffset int64 @0, batchLength int32 @8, partitionLeaderEpoch int32 @12, magic int8 @16,
  crc uint32 @17 (CRC32C of bytes @21..end), attributes int16 @21, lastOffsetDelta int32 @23,
  baseTimestamp int64 @27, maxTimestamp int64 @35, producerId int64 @43, producerEpoch int16 @51,
  baseSequence int32 @53, recordsCount int32 @57; records start @61.
"""
from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import Iterator

import cramjam
import crc32c
import pylog_native

from kafka_protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    MessageTooLargeError,
    RecordValidationError,
    UnsupportedMessageFormatError,
)

__all__ = [
    "HEADER_SIZE", "LOG_OVERHEAD", "BatchHeader", "parse_header", "unpack_header", "validate_batches",
    "check_headers", "assign_offsets", "iter_record_timestamps", "whole_batches_length",
]

HEADER_SIZE = 61          # bytes of the batch header; records start here
LOG_OVERHEAD = 12         # baseOffset int64 + batchLength int32: bytes not counted by batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD   # smallest legal batchLength (49)
CRC_START = 21            # CRC32C covers bytes [21, end of batch)
CURRENT_MAGIC = 2
NO_PRODUCER_ID = -1
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1     # producer sequences wrap past it to 0

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_LEADER_EPOCH_POS = 12     # Kafka stamps the leader epoch on append
_MAGIC_POS = 16
_CRC_POS = 17
_ATTRIBUTES_POS = 21
_MAX_TIMESTAMP_POS = 35
_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16     # magic (8) + version int32 + compatible version int32
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")

COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass(slots=True)
class BatchHeader:
    """The 61-byte header of one batch, plus where it was read from."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int = 0
    max_timestamp_wrong: bool = False   # the producer's max timestamp is not its records' (validate_batches)

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & _TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping past int32 max to 0 as Kafka does (-1 if none)."""
        if self.base_sequence < 0:
            return -1
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def unpack_header(buf: bytes | bytearray | memoryview, at: int, position: int) -> BatchHeader:
    """The 13 header fields at `at` of `buf`, for a batch at file/request position `position`."""
    return BatchHeader(*_HEADER.unpack_from(buf, at), position)  # type: ignore[call-arg]  # 13 fields + position


def increment_sequence(sequence: int, increment: int) -> int:
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch starting at `pos`; CorruptRecordError if fewer than 61 bytes remain."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"record batch header at position {pos} is truncated "
                                 f"({len(buf) - pos} of {HEADER_SIZE} bytes)")
    return unpack_header(buf, pos, pos)


# A batch's records may expand to this much when decompressed (at least; see `uncompressed_limit`).
MIN_UNCOMPRESSED_LIMIT = 64 * 1024 * 1024


def uncompressed_limit(max_batch_bytes: int) -> int:
    """How far one compressed batch may expand: 8x max.message.bytes, at least 64 MiB (a bound on memory)."""
    return max(MIN_UNCOMPRESSED_LIMIT, 8 * max_batch_bytes)


def validate_batches(buf: bytes | bytearray | memoryview, max_batch_bytes: int, *,
                     compacted: bool = False, create_time: bool = True,
                     timestamp_range: tuple[int, int] = (-2**63, 2**63 - 1)) -> list[BatchHeader]:
    """Check every batch of a produce request and every record in it; return the batches' headers.

    Headers (length, magic, CRC32C, size) are checked here; records by `pylog_native.validate_batches`
    (Kafka's LogValidator rules). A batch-level problem raises CorruptRecordError or InvalidRecordError;
    records rejected one by one (keyless on a compacted topic, LogAppendTime from a client on a
    CreateTime topic, a CreateTime timestamp outside `timestamp_range`) raise RecordValidationError
    with each record's index (KIP-467).
    """
    headers = check_headers(buf, max_batch_bytes)
    try:
        max_timestamps, record_errors = pylog_native.validate_batches(
            buf, compacted, create_time, uncompressed_limit(max_batch_bytes), *timestamp_range)
    except pylog_native.ValidationError as e:
        err = CorruptRecordError(str(e)) if e.code == ErrorCode.corrupt_message else InvalidRecordError(str(e))
        err.from_validator = True
        raise err from None
    if record_errors:
        first = ErrorCode(record_errors[0][1])
        raise RecordValidationError(first, [(i, m) for i, _, m in record_errors],
                                    f"{len(record_errors)} record(s) rejected; the first: {record_errors[0][2]}")
    for h, ts in zip(headers, max_timestamps):
        if h.timestamp_type == 0 and ts != h.max_timestamp:
            h.max_timestamp = ts
            h.max_timestamp_wrong = True
    return headers


def single_batch(buf: bytes | bytearray | memoryview) -> bool:
    """Whether `buf` holds at most one batch by its first length (Produce v3+ allows exactly one).

    A first length too short for a header says nothing about the count: the header checks report it."""
    if len(buf) < LOG_OVERHEAD:
        return True
    _, length = _OFFSET_AND_LENGTH.unpack_from(buf, 0)
    return length < MIN_BATCH_LENGTH or length + LOG_OVERHEAD >= len(buf)


def check_headers(buf: bytes | bytearray | memoryview, max_batch_bytes: int) -> list[BatchHeader]:
    """Length, magic, CRC32C and size of every batch; their headers (the records are not walked)."""
    total = len(buf)
    if total == 0:
        raise InvalidRecordError("produce request has no record batches")
    view = memoryview(buf)
    headers: list[BatchHeader] = []
    pos = 0
    while pos < total:
        remaining = total - pos
        if remaining < LOG_OVERHEAD:   # Kafka: InvalidRecordException for a batch cut short
            raise InvalidRecordError(f"record batch at position {pos} is truncated ({remaining} bytes)")
        _, length = _OFFSET_AND_LENGTH.unpack_from(view, pos)
        if remaining > _MAGIC_POS:
            magic = view[pos + _MAGIC_POS]
            if magic < CURRENT_MAGIC:
                raise UnsupportedMessageFormatError(
                    "message format v0/v1 is not supported; use a client that sends record batch v2")
            if magic > CURRENT_MAGIC:
                raise CorruptRecordError(f"record batch at position {pos} has unknown magic {magic}")
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"record batch at position {pos} has invalid length {length}")
        size = length + LOG_OVERHEAD
        if size > remaining:
            raise InvalidRecordError(
                f"record batch at position {pos} is truncated: {size} bytes declared, {remaining} present")
        if size > max_batch_bytes:
            raise MessageTooLargeError(
                f"record batch of {size} bytes exceeds the topic's max.message.bytes of {max_batch_bytes}")
        header = unpack_header(view, pos, pos)
        if crc32c.crc32c(view[pos + CRC_START:pos + size]) != header.crc:
            raise CorruptRecordError(f"record batch at position {pos} failed its CRC32C check")
        headers.append(header)      # counts, offset deltas and control batches: the record walk's checks
        pos += size
    return headers


def whole_batches_length(buf: bytes | bytearray | memoryview) -> int:
    """Bytes of the whole batches at the start of `buf`, leaving out a trailing partial batch (a Fetch
    response may end in one). A length too small for any batch ends the walk with all of `buf`, so
    that `check_headers` reports it rather than it being dropped as partial."""
    total = len(buf)
    pos = 0
    while total - pos >= LOG_OVERHEAD:
        _, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
        if length < MIN_BATCH_LENGTH:
            return total
        if pos + LOG_OVERHEAD + length > total:
            break
        pos += LOG_OVERHEAD + length
    return pos


def assign_offsets(buf: bytearray, headers: list[BatchHeader], base_offset: int,
                   log_append_time_ms: int | None, leader_epoch: int) -> None:
    """Give the batches consecutive offsets from `base_offset` and `leader_epoch`, in place (and
    LogAppendTime if given).

    The CRC does not cover the base offset, so it is recomputed only when LogAppendTime rewrites the
    attributes and max timestamp, or when the producer's max timestamp was wrong (validate_batches
    found its records' true one). `headers` are updated to match the rewritten bytes.
    """
    view = memoryview(buf)
    next_offset = base_offset
    for h in headers:
        _INT64.pack_into(buf, h.position, next_offset)
        _INT32.pack_into(buf, h.position + _LEADER_EPOCH_POS, leader_epoch)   # not under the CRC
        h.partition_leader_epoch = leader_epoch
        h.base_offset = next_offset
        next_offset = h.last_offset + 1
        if log_append_time_ms is not None:
            h.attributes |= _TIMESTAMP_TYPE_BIT
            h.max_timestamp = log_append_time_ms
            _INT16.pack_into(buf, h.position + _ATTRIBUTES_POS, h.attributes)
        elif not h.max_timestamp_wrong:
            continue
        h.max_timestamp_wrong = False
        _INT64.pack_into(buf, h.position + _MAX_TIMESTAMP_POS, h.max_timestamp)
        h.crc = crc32c.crc32c(view[h.position + CRC_START:h.position + h.size])
        _UINT32.pack_into(buf, h.position + _CRC_POS, h.crc)


# --- Record decoding (off the hot path) --------------------------------------------------------

def _varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint at `pos`: (value, position after it)."""
    result = 0
    shift = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise CorruptRecordError("record is truncated inside a varint") from None
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint is longer than 10 bytes")


def _xerial_snappy(data: bytes) -> bytes:
    out = bytearray()
    pos = _XERIAL_HEADER_SIZE
    while pos < len(data):
        (n,) = _INT32.unpack_from(data, pos)
        pos += 4
        out += bytes(cramjam.snappy.decompress_raw(data[pos:pos + n]))
        pos += n
    return bytes(out)


def decompress(compression: int, data: bytes) -> bytes:
    """The uncompressed records section of a batch with compression codec `compression`."""
    try:
        if compression == 0:
            return data
        if compression == 1:
            return bytes(cramjam.gzip.decompress(data))
        if compression == 2:
            if data.startswith(_XERIAL_MAGIC):
                return _xerial_snappy(data)
            return bytes(cramjam.snappy.decompress_raw(data))
        if compression == 3:
            return bytes(cramjam.lz4.decompress(data))
        if compression == 4:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as e:
        raise CorruptRecordError(f"cannot decompress {COMPRESSION_NAMES[compression]} batch: {e}") from None
    raise CorruptRecordError(f"unknown compression codec {compression}")


def iter_record_timestamps(batch: bytes | bytearray | memoryview) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of each record of one whole batch. For ListOffsets, never for Produce/Fetch."""
    h = parse_header(batch)
    records = decompress(h.compression, bytes(batch[HEADER_SIZE:h.size]))
    log_append_time = h.timestamp_type == 1
    pos = 0
    for _ in range(h.records_count):
        length, body = _varint(records, pos)
        pos = body + length
        if length < 0 or pos > len(records):
            raise CorruptRecordError(f"record in batch at offset {h.base_offset} is truncated")
        timestamp_delta, p = _varint(records, body + 1)   # skip the attributes byte
        offset_delta, _ = _varint(records, p)
        ts = h.max_timestamp if log_append_time else h.base_timestamp + timestamp_delta
        yield h.base_offset + offset_delta, ts
