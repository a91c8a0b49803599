"""Test support: encode Kafka record batches v2 shaped as real clients send them, malformed ones too.

Records and the batch frame come from the broker's own encoder (kafka_protocol/record_builder.py); this
module adds what only tests need: compression (every codec, xerial-framed snappy too; the broker
never compresses), the transactional and control flags, gaps between offsets, empty batches and a
wrong magic byte. Corrupt batches beyond that are made by editing the returned bytes.
"""
from __future__ import annotations

import struct
from typing import Sequence

import cramjam

from kafka_protocol import record_builder
from kafka_protocol.record_builder import frame_batch, zigzag_varint

__all__ = ["CODECS", "zigzag_varint", "encode_record", "compress", "encode_batch", "batch_of_size", "producer_batch"]

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "snappy-xerial": 2, "lz4": 3, "zstd": 4}
_MAGIC_POS = 16   # outside the CRC, which covers the bytes from the attributes on


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: Sequence[tuple[bytes, bytes | None]] = ()) -> bytes:
    """One record as a client encodes it (header keys as bytes), by the broker's encoder."""
    return record_builder.encode_record(offset_delta, timestamp_delta, key, value,
                                        [(hk.decode(), hv) for hk, hv in headers])


def xerial_snappy(data: bytes, block: int = 32 * 1024) -> bytes:
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for i in range(0, len(data), block):
        chunk = bytes(cramjam.snappy.compress_raw(data[i:i + block]))
        out += struct.pack(">i", len(chunk)) + chunk
    return bytes(out)


def compress(codec: str, data: bytes) -> bytes:
    if codec == "none":
        return data
    if codec == "gzip":
        return bytes(cramjam.gzip.compress(data))
    if codec == "snappy":
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == "snappy-xerial":
        return xerial_snappy(data)
    if codec == "lz4":
        return bytes(cramjam.lz4.compress(data))
    if codec == "zstd":
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(codec)


def encode_batch(values: Sequence[bytes | None] = (b"v",), *, timestamps: Sequence[int] | None = None,
                 keys: Sequence[bytes | None] | None = None, base_offset: int = 0, codec: str = "none",
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 magic: int = 2, log_append_time: bool = False, transactional: bool = False,
                 control: bool = False, partition_leader_epoch: int = -1,
                 record_headers: Sequence[tuple[bytes, bytes | None]] = (),
                 offset_deltas: Sequence[int] | None = None) -> bytes:
    """One v2 batch holding one record per value; timestamps default to 1_000_000 + i.

    `offset_deltas` (increasing) leaves gaps between records, as compaction does; default 0, 1, 2, ...
    """
    n = len(values)
    ts = list(timestamps) if timestamps is not None else [1_000_000 + i for i in range(n)]
    base_ts = min(ts) if ts else -1
    keys = list(keys) if keys is not None else [None] * n
    deltas = list(offset_deltas) if offset_deltas is not None else list(range(n))
    records = b"".join(encode_record(deltas[i], ts[i] - base_ts, keys[i], values[i], record_headers)
                       for i in range(n))
    attributes = CODECS[codec] | (0x08 if log_append_time else 0) | (0x10 if transactional else 0) \
        | (0x20 if control else 0)
    batch = frame_batch(compress(codec, records), n, base_offset=base_offset,
                        last_offset_delta=deltas[-1] if deltas else 0,
                        base_timestamp=base_ts, max_timestamp=max(ts) if ts else -1, attributes=attributes,
                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                        partition_leader_epoch=partition_leader_epoch)
    return batch if magic == 2 else batch[:_MAGIC_POS] + bytes([magic]) + batch[_MAGIC_POS + 1:]


def batch_of_size(size: int, *, timestamp: int = 1_000_000, **kw: object) -> bytes:
    """An uncompressed batch of one or two records of exactly `size` bytes (size >= 70)."""
    overhead = len(encode_batch([b""], timestamps=[timestamp], **kw))  # type: ignore[arg-type]
    value_len = size - overhead
    # varint lengths grow with the value, so search near the estimate, with and without a 1-byte key
    # (or split over two records when one record's length varint would skip the size)
    for n in (1, 2):
        for v in range(max(value_len - 8, 0), value_len + 4):
            parts = [b"x" * v] if n == 1 else [b"x" * (v // 2), b"x" * (v - v // 2 - 4)]
            b = encode_batch(parts, timestamps=[timestamp] * n, **kw)  # type: ignore[arg-type]
            if len(b) == size:
                return b
    raise ValueError(f"cannot make a batch of exactly {size} bytes")


def producer_batch(pid: int, epoch: int, seq: int, n: int = 1, **kw: object) -> bytes:
    return encode_batch([b"p%d" % i for i in range(n)], producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, **kw)  # type: ignore[arg-type]


def transactional_batch(pid: int, epoch: int, seq: int, values: Sequence[bytes], **kw: object) -> bytes:
    """A transactional batch (attributes bit 4) of one record per value, as a transactional producer sends it."""
    return encode_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        transactional=True, **kw)  # type: ignore[arg-type]


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def decode_batches(data: bytes | None) -> list[dict[str, object]]:
    """The v2 batches of a Fetch answer's record set, each a dict of its header fields and its records
    (`records`: (offset, key, value) tuples); uncompressed batches only, a partial batch at the end
    (as Fetch may return) left out. Control batches keep their records: key b"\\x00\\x00\\x00\\x00"
    marks an abort, b"\\x00\\x00\\x00\\x01" a commit (`control_type` says "abort" or "commit")."""
    data = bytes(data or b"")
    out: list[dict[str, object]] = []
    pos = 0
    while pos + 61 <= len(data):
        base_offset, length, _epoch, magic, _crc, attributes, last_delta, _base_ts, _max_ts, pid, p_epoch, \
            base_seq, count = struct.unpack_from(">qiibIhiqqqhii", data, pos)
        end = pos + 12 + length
        if end > len(data):
            break
        if magic != 2 or attributes & 0x07:
            raise ValueError(f"only uncompressed v2 batches are decoded (magic {magic}, attributes {attributes:#x})")
        records: list[tuple[int, bytes | None, bytes | None]] = []
        at = pos + 61
        for _ in range(count):
            _length, at = _read_varint(data, at)
            at += 1                                     # record attributes
            _ts_delta, at = _read_varint(data, at)
            offset_delta, at = _read_varint(data, at)
            fields: list[bytes | None] = []
            for _field in ("key", "value"):
                n, at = _read_varint(data, at)
                fields.append(None if n < 0 else data[at:at + n])
                at += max(n, 0)
            headers, at = _read_varint(data, at)
            for _h in range(headers):
                n, at = _read_varint(data, at)
                at += n
                n, at = _read_varint(data, at)
                at += max(n, 0)
            records.append((base_offset + offset_delta, fields[0], fields[1]))
        control = bool(attributes & 0x20)
        control_type = None
        if control and records and records[0][1] is not None and len(records[0][1]) >= 4:
            control_type = {0: "abort", 1: "commit"}.get(struct.unpack_from(">h", records[0][1], 2)[0], "unknown")
        out.append({"base_offset": base_offset, "last_offset": base_offset + last_delta, "producer_id": pid,
                     "producer_epoch": p_epoch, "base_sequence": base_seq, "transactional": bool(attributes & 0x10),
                     "control": control, "control_type": control_type, "records": records})
        pos = end
    return out
