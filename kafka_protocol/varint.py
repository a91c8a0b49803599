"""Kafka's unsigned varints and tagged-field sections, read and written. Sans I/O.

The one implementation used by the request codecs, the Produce fast path, the length guard and the
Fetch response encoder. Reading errors are `VarintError`, a ValueError, so every decoder's
"malformed" handling covers them.
"""
from __future__ import annotations

from typing import Any


class VarintError(ValueError):
    pass


def read_uvarint(buf: Any, pos: int, end: int | None = None) -> tuple[int, int]:
    """(value, position after it) of the unsigned varint at `pos`; at most 5 bytes (int32 range)."""
    end = len(buf) if end is None else end
    shift = result = 0
    while True:
        if pos >= end:
            raise VarintError("truncated unsigned varint")
        if shift > 28:
            raise VarintError("unsigned varint is too long")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def skip_tagged_fields(buf: Any, pos: int, end: int | None = None) -> int:
    """The position after a tagged-field section; VarintError if it runs past `end`."""
    end = len(buf) if end is None else end
    count, pos = read_uvarint(buf, pos, end)
    if count > end - pos:
        raise VarintError(f"{count} tagged fields cannot fit in the request")
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        pos += size
        if pos > end:
            raise VarintError("tagged field runs past the end of the request")
    return pos


def write_uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)
