"""Kafka record batches (the records bytes of one partition's Fetch response) → `pyarrow.RecordBatch`.

Owns the call into the native decoder (`pylog_native`, built from native/) and the assembly of its
buffers into Arrow arrays without copying: the decoder returns Arrow-layout buffers that pyarrow
wraps as they are. Topic and partition are constants of the range. The row layout is the source's
(sparklog.schema). A corrupt batch raises `CorruptBatchError` naming topic, partition and offset.

`reference_decode` is the pure-Python oracle (on the broker's own record decoder): slow, simple,
used by the tests to check the native decoder record by record. Never fetches anything.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

import pylog_native
from sparklog.schema import ARROW_HEADERS, ARROW_TIMESTAMP

MAX_BATCH_BYTES = 256 * 1024 * 1024   # a compressed batch may not expand beyond this


class CorruptBatchError(ValueError):
    """The bytes of a partition are not valid record batches; names topic, partition and where.

    `offset` is the corrupt batch's base offset (when its header was readable), `good` the rows of
    the complete batches before it, `resume_at` the base offset of the batch after it when that one
    is in the same data (else None: where the log goes on is unknown).
    """

    def __init__(self, message: str, offset: int | None = None, good: "DecodedRange | None" = None,
                 resume_at: int | None = None) -> None:
        super().__init__(message)
        self.offset, self.good, self.resume_at = offset, good, resume_at


class BatchInfo(NamedTuple):
    """What read_committed filtering needs of each batch (decoded, not yet acted on)."""

    base_offset: int
    last_offset: int
    producer_id: int
    transactional: bool
    control: bool


@dataclass(frozen=True)
class DecodedRange:
    batch: pa.RecordBatch
    next_offset: int          # the offset after the last complete batch, -1 when none was complete
    consumed: int             # bytes of the input in complete batches
    batches: list[BatchInfo]


def _buf(obj: Any) -> pa.Buffer | None:
    return None if obj is None else pa.py_buffer(obj)


def _var(d: dict[str, Any], name: str, typ: pa.DataType, n: int) -> pa.Array:
    return pa.Array.from_buffers(typ, n, [_buf(d[f"{name}_validity"]), _buf(d[f"{name}_offsets"]),
                                          _buf(d[f"{name}_data"])], null_count=d[f"{name}_nulls"])


def decode_range(data: bytes | memoryview, topic: str, partition: int, start: int, end: int, schema: pa.Schema,
                 include_headers: bool, verify_crc: bool = True, max_rows: int = 2**63 - 1) -> DecodedRange:
    """Rows of the records with offsets in [start, end) among the complete batches of `data`; with
    `max_rows`, decoding stops after the batch that reaches it (go on from `consumed`)."""
    try:
        d = pylog_native.decode_batches(data, start, end, include_headers, verify_crc, MAX_BATCH_BYTES, max_rows)
    except pylog_native.DecodeError as e:
        at: int | None = getattr(e, "batch_start", None)
        good = decode_range(data[:at], topic, partition, start, end, schema, include_headers, verify_crc) if at else None
        raise CorruptBatchError(f"{topic}-{partition}: {e}", getattr(e, "base_offset", None), good,
                                _next_batch_offset(data, at)) from None
    n = d["rows"]
    columns = [
        _var(d, "key", pa.binary(), n),
        _var(d, "value", pa.binary(), n),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.Array.from_buffers(pa.int64(), n, [None, _buf(d["offset"])]),
        pa.Array.from_buffers(ARROW_TIMESTAMP, n, [None, _buf(d["timestamp_us"])]),
        pa.Array.from_buffers(pa.int32(), n, [None, _buf(d["timestamp_type"])]),
    ]
    if include_headers:
        pairs = d["header_key_offsets"]
        m = len(pairs) // 4 - 1
        struct = pa.StructArray.from_arrays([_var(d, "header_key", pa.string(), m),
                                             _var(d, "header_value", pa.binary(), m)],
                                            fields=list(ARROW_HEADERS.value_type))
        offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, _buf(d["headers_offsets"])])
        none = pc.equal(pc.subtract(offsets[1:], offsets[:-1]), 0)   # no headers: null, as Spark's connector
        columns.append(pa.ListArray.from_arrays(offsets, struct, type=ARROW_HEADERS, mask=none))
    batches = [BatchInfo(*b) for b in d["batches"]]
    return DecodedRange(pa.RecordBatch.from_arrays(columns, schema=schema), d["next_offset"], d["consumed"], batches)


_FRAME = struct.Struct(">qi")   # base offset, batch length


def _next_batch_offset(data: bytes | memoryview, at: int | None) -> int | None:
    """The base offset of the batch after the one starting at byte `at`, if its length is sane and it is in `data`."""
    if at is None or at + _FRAME.size > len(data):
        return None
    _, length = _FRAME.unpack_from(data, at)
    after = at + _FRAME.size + length
    if length <= 0 or after + _FRAME.size > len(data):
        return None
    return int(_FRAME.unpack_from(data, after)[0])


def reference_decode(data: bytes, start: int, end: int) -> list[dict[str, Any]]:
    """The oracle: the same rows as plain dicts, decoded in Python by the broker's record decoder."""
    from kafka_protocol.record_batch import parse_header
    from kafka_protocol.record_builder import decode_records, iter_batches

    rows = []
    for pos, size in iter_batches(data):
        batch = data[pos:pos + size]
        h = parse_header(batch)
        if h.is_control:
            continue
        for r in decode_records(batch):
            if start <= r.offset < end:
                rows.append({"key": r.key, "value": r.value, "offset": r.offset, "timestamp_ms": r.timestamp,
                             "timestamp_type": h.timestamp_type, "headers": list(r.headers) or None})
    return rows
