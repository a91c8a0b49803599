"""A topic's `compression.type`: rewrite a produced batch's records section with the topic's codec.

Kafka keeps the producer's codec when a topic says `producer` (the default) and otherwise stores
every batch in the topic's codec (`uncompressed`, `gzip`, `snappy`, `lz4`, `zstd`), recompressing on
append. The batch header is kept (producer id, epoch, sequence, timestamps, offsets, count); only the
codec bits of the attributes, the records section and the CRC change. Runs after validation, so the
records section is known to decompress. Snappy is written with the xerial framing the Java client
uses; lz4 as an LZ4 frame, as Kafka does for record batch v2.
"""
from __future__ import annotations

import struct

import cramjam
import crc32c

from kafka_protocol.record_batch import CRC_START, HEADER_SIZE
from kafka_protocol.record_batch import BatchHeader, decompress

CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_CODEC_BITS = 0x07
_ATTRIBUTES_POS = 21
_CRC_POS = 17
_LENGTH_POS = 8
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def target_codec(compression_type: str) -> int | None:
    """The codec a topic stores batches in, or None to keep the producer's (`producer`)."""
    return CODECS.get(compression_type)


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """`data` in `codec`; `level` as the topic's compression.<codec>.level says (None or -1: the codec's own)."""
    if level is not None and level < 0:
        level = None
    if codec == 0:
        return data
    if codec == 1:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == 2:
        out = bytearray(_XERIAL_HEADER)
        for i in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[i:i + _XERIAL_BLOCK]))
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if codec == 3:
        return bytes(cramjam.lz4.compress(data, level=level))
    if codec == 4:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise ValueError(f"unknown compression codec {codec}")


def recompress(buf: bytes | bytearray | memoryview, headers: list[BatchHeader], codec: int,
               level: int | None = None) -> bytes | None:
    """The batches of `buf` in `codec`, or None when every batch already uses it (nothing to do)."""
    if all(h.compression == codec for h in headers):
        return None
    view = memoryview(buf)
    out = bytearray()
    for h in headers:
        batch = view[h.position:h.position + h.size]
        if h.compression == codec:
            out += batch
            continue
        records = compress(codec, decompress(h.compression, bytes(batch[HEADER_SIZE:])), level)
        start = len(out)
        out += batch[:HEADER_SIZE]
        out += records
        attributes = (h.attributes & ~_CODEC_BITS) | codec
        struct.pack_into(">h", out, start + _ATTRIBUTES_POS, attributes)
        struct.pack_into(">i", out, start + _LENGTH_POS, HEADER_SIZE - 12 + len(records))
        struct.pack_into(">I", out, start + _CRC_POS, crc32c.crc32c(memoryview(out)[start + CRC_START:]))
    return bytes(out)
