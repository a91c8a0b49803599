"""Kafka request framing: a 4-byte big-endian size, then that many bytes. Sans I/O.

Owns splitting a byte stream into frames and enforcing `socket.request.max.bytes`. Knows nothing
about sockets or about what is inside a frame.
"""
from __future__ import annotations

import struct

SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The stream cannot be framed (negative or oversized length): the connection must be closed."""


def frame_length(prefix: bytes, max_bytes: int) -> int:
    """Validate a 4-byte size prefix and return the frame length that follows it."""
    (n,) = SIZE.unpack(prefix)
    if n < 0:
        raise FrameError(f"negative frame size {n}")
    if n > max_bytes:
        raise FrameError(f"frame of {n} bytes exceeds socket.request.max.bytes={max_bytes}")
    return n


class FrameDecoder:
    """Incremental decoder: feed bytes, take complete frames (without their size prefix)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        frames: list[bytes] = []
        while len(self._buf) >= 4:
            n = frame_length(bytes(self._buf[:4]), self.max_bytes)
            if len(self._buf) < 4 + n:
                break
            frames.append(bytes(self._buf[4 : 4 + n]))
            del self._buf[: 4 + n]
        return frames


def encode_frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload
