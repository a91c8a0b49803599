"""Transaction markers: the control batches that end a transaction in each of its partitions (KIP-98).

Owns the one format both sides read: a control batch (attributes: transactional and control bits)
of one record whose key is (version int16 = 0, type int16: 0 ABORT, 1 COMMIT) and whose value is
Kafka's EndTxnMarker (version int16 = 0, coordinator epoch int32). `encode_marker` builds the batch
a broker appends for WriteTxnMarkers; `read_marker` reads one back (recovery, the log cleaner,
tests). Sans-I/O.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from kafka_protocol.errors import CorruptRecordError
from kafka_protocol.record_batch import parse_header
from kafka_protocol.record_builder import Record, decode_records, encode_record, frame_batch

__all__ = ["ABORT", "COMMIT", "Marker", "encode_marker", "read_marker"]

ABORT, COMMIT = 0, 1
CONTROL_ATTRIBUTES = 0x10 | 0x20        # transactional | control
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class Marker:
    """What a control batch says: which producer's transaction ended, how, and by which coordinator."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


def encode_marker(marker: Marker, timestamp_ms: int, base_offset: int = 0) -> bytes:
    """The control batch of one marker (offsets are assigned on append, as for any batch)."""
    key = _KEY.pack(0, COMMIT if marker.commit else ABORT)
    value = _VALUE.pack(0, marker.coordinator_epoch)
    record = encode_record(0, 0, key, value)
    return frame_batch(record, 1, base_offset=base_offset, last_offset_delta=0, base_timestamp=timestamp_ms,
                       max_timestamp=timestamp_ms, attributes=CONTROL_ATTRIBUTES, producer_id=marker.producer_id,
                       producer_epoch=marker.producer_epoch, base_sequence=-1)


def read_marker(batch: bytes | bytearray | memoryview) -> Marker:
    """The marker of one whole control batch; CorruptRecordError for anything else."""
    h = parse_header(batch)
    if not h.is_control:
        raise CorruptRecordError(f"batch at offset {h.base_offset} is not a control batch")
    records: list[Record] = decode_records(batch)
    if not records or records[0].key is None or len(records[0].key) < _KEY.size:
        raise CorruptRecordError(f"control batch at offset {h.base_offset} has no control record key")
    _, kind = _KEY.unpack_from(records[0].key)
    if kind not in (ABORT, COMMIT):
        raise CorruptRecordError(f"control batch at offset {h.base_offset} has unknown type {kind}")
    epoch = -1
    value = records[0].value
    if value is not None and len(value) >= _VALUE.size:
        _, epoch = _VALUE.unpack_from(value)
    return Marker(h.producer_id, h.producer_epoch, kind == COMMIT, epoch)
