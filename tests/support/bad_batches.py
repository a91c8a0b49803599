"""Test support: a catalogue of bad record batches, one per kind a buggy or hostile producer can send.

`CORRUPT` holds batches Kafka cannot read (answered CORRUPT_MESSAGE), `INVALID` batches that
contradict themselves (INVALID_RECORD). Each builds fresh bytes; `raw_batch` wraps any records
section in a batch with a correct CRC, so only the content is wrong.
"""
from __future__ import annotations

import struct
from typing import Callable

import cramjam
import crc32c

from tests.support.batches import compress, encode_batch, encode_record, zigzag_varint

_AFTER_CRC = struct.Struct(">hiqqqhii")


def raw_batch(records: bytes, count: int, last_offset_delta: int | None = None, *, attributes: int = 0,
              producer_id: int = -1, base_sequence: int = -1, base_ts: int = 1_000, max_ts: int = 1_000,
              magic: int = 2) -> bytes:
    """A batch around an arbitrary records section, with a correct CRC (so only the content is wrong)."""
    delta = count - 1 if last_offset_delta is None else last_offset_delta
    after_crc = _AFTER_CRC.pack(attributes, delta, base_ts, max_ts, producer_id, 0, base_sequence, count) + records
    return struct.pack(">qiibI", 0, 9 + len(after_crc), -1, magic, crc32c.crc32c(after_crc)) + after_crc


def rec(i: int, key: bytes | None = b"k", value: bytes | None = b"v") -> bytes:
    return encode_record(i, 0, key, value)


TWO = rec(0) + rec(1)
_LZ4_FRAME_HEADER_ONLY = bytes(cramjam.lz4.compress(b"x" * 100))[:7]


def _flip_last_byte(b: bytes) -> bytes:
    return b[:-1] + bytes([b[-1] ^ 0xFF])


def _record_body(body: bytes) -> bytes:
    return zigzag_varint(len(body)) + body


CORRUPT: dict[str, Callable[[], bytes]] = {
    "gzip payload is not gzip": lambda: raw_batch(b"\x1f\x8b\x08garbage-garbage", 2, attributes=1),
    "snappy payload is not snappy": lambda: raw_batch(b"\xff\xff\xff\xff\x0fgarbage", 2, attributes=2),
    "xerial snappy block overruns": lambda: raw_batch(b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 999) + b"x", 2,
                                                      attributes=2),
    "lz4 payload is not lz4": lambda: raw_batch(b"\x04\x22\x4d\x18garbage-garbage", 2, attributes=3),
    "an lz4 frame header alone": lambda: raw_batch(_LZ4_FRAME_HEADER_ONLY, 2, attributes=3),   # no end mark
    "lz4 content checksum mismatch": lambda: raw_batch(_flip_last_byte(compress("lz4", TWO)), 2, attributes=3),
    "bytes after the lz4 frame": lambda: raw_batch(compress("lz4", TWO) + b"junk", 2, attributes=3),
    "zstd payload is not zstd": lambda: raw_batch(b"\x28\xb5\x2f\xfdgarbage-garbage", 2, attributes=4),
    "truncated zstd payload": lambda: raw_batch(compress("zstd", TWO * 50)[:-5], 100, attributes=4),
    "codec 5": lambda: raw_batch(TWO, 2, attributes=5),
    "codec 6": lambda: raw_batch(TWO, 2, attributes=6),
    "codec 7": lambda: raw_batch(TWO, 2, attributes=7),
    "CRC mismatch": lambda: _flip_last_byte(encode_batch([b"a", b"b"])),
    "batch length below a header": lambda: struct.pack(">qiib", 0, 20, -1, 2) + b"\x00" * 60,
    "magic 3": lambda: raw_batch(TWO, 2, magic=3),
}

INVALID: dict[str, Callable[[], bytes]] = {
    "batch length past the data": lambda: encode_batch([b"a"])[:-3],
    "records count 0": lambda: raw_batch(b"", 0, 0),
    "records count above the records present": lambda: raw_batch(TWO, 3),
    "records count below the records present": lambda: raw_batch(TWO, 1),
    "lastOffsetDelta 2^31-1 for one record": lambda: raw_batch(rec(0), 1, 2**31 - 1),
    "lastOffsetDelta disagrees with count": lambda: raw_batch(TWO, 2, 5),
    "negative lastOffsetDelta": lambda: raw_batch(TWO, 2, -1),
    "garbage record bytes": lambda: raw_batch(b"\x07\x13\x99garbage-garbage-garbage", 2),
    "negative record length": lambda: raw_batch(zigzag_varint(-5) + rec(1), 2),
    "record length past the batch": lambda: raw_batch(zigzag_varint(200) + b"\x00" * 10, 1),
    "varint longer than 5 bytes": lambda: raw_batch(b"\xff" * 12, 1),
    "offset delta is not the record's index": lambda: raw_batch(rec(0) + rec(7), 2),
    "key length below -1": lambda: raw_batch(_record_body(b"\x00\x00\x00" + zigzag_varint(-3) + b"\x00\x00"), 1),
    "value longer than the record": lambda: raw_batch(_record_body(b"\x00\x00\x00\x00" + zigzag_varint(50) + b"ab\x00"), 1),
    "header count larger than the record": lambda: raw_batch(_record_body(b"\x00\x00\x00\x00\x00" + zigzag_varint(1000)), 1),
    "null header key": lambda: raw_batch(_record_body(b"\x00\x00\x00\x00\x00\x02\x01\x00"), 1),
    "bytes after a record's fields": lambda: raw_batch(_record_body(b"\x00\x00\x00\x00\x00\x00extra"), 1),
    "compressed records count mismatch": lambda: raw_batch(compress("lz4", TWO), 3, attributes=3),
    "compressed garbage records": lambda: raw_batch(compress("gzip", b"\x07garbage" * 20), 2, attributes=1),
    "control batch from a client": lambda: encode_batch([b"x"], control=True),
    "producer id without a sequence": lambda: encode_batch([b"x"], producer_id=7, producer_epoch=0, base_sequence=-1),
    "second batch of two is bad": lambda: encode_batch([b"ok"]) + raw_batch(TWO, 3),
}
