"""Kafka request framing: a 4-byte big-endian size, then that many bytes. Sans I/O.

Owns `FrameReceiver`, the one framing state machine of the broker: it hands out the memory the next
received bytes go into (a reusable buffer; a frame larger than it gets a buffer of its own, filled
by the kernel directly), is told how many bytes arrived, and yields the complete frames, cut in
place. It enforces `socket.request.max.bytes` before allocating anything. `broker/connection.py`
drives it from asyncio's BufferedProtocol callbacks; the tests drive it by feeding bytes. Knows
nothing about sockets or about what is inside a frame.

Invariants: unconsumed bytes are `buf[start:end]`; at most one oversized frame is being received,
and while it is, nothing else is buffered; a frame view from the reusable buffer is valid only
until the next `buffer()` call (`owned` says when the frame's memory is its own and may be kept).
"""
from __future__ import annotations

import struct
from typing import Iterator

SIZE = struct.Struct(">i")
READ_BUFFER_BYTES = 64 * 1024       # the reusable receive buffer (per connection)
MIN_FREE_BYTES = 16 * 1024          # compact the buffer when less than this is free at its end


class FrameError(Exception):
    """The stream cannot be framed (negative or oversized length): the connection must be closed."""


def frame_length(prefix: bytes | memoryview, max_bytes: int, at: int = 0) -> int:
    """Validate the 4-byte size prefix at `at` and return the frame length that follows it."""
    (n,) = SIZE.unpack_from(prefix, at)
    if n < 0:
        raise FrameError(f"negative frame size {n}")
    if n > max_bytes:
        raise FrameError(f"frame of {n} bytes exceeds socket.request.max.bytes={max_bytes}")
    return int(n)


class FrameReceiver:
    """Bytes in (into `buffer()`, then `received(n)`), complete frames out, without copying."""

    def __init__(self, max_bytes: int, buffer_bytes: int = READ_BUFFER_BYTES) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray(buffer_bytes)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None       # the oversized frame being received into its own buffer
        self._big_view: memoryview | None = None
        self._big_got = 0

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a yielded frame."""
        return self._big_got if self._big is not None else self._end - self._start

    def buffer(self) -> memoryview:
        """Where the next received bytes go (never empty)."""
        if self._big_view is not None:
            return self._big_view[self._big_got:]
        if len(self._buf) - self._end < MIN_FREE_BYTES and self._start > 0:
            n = self._end - self._start
            self._view[:n] = self._view[self._start:self._end]
            self._start, self._end = 0, n
        return self._view[self._end:]

    def received(self, nbytes: int) -> Iterator[tuple[memoryview, bool]]:
        """The frames completed by `nbytes` new bytes in `buffer()`, as (frame, owned), in order.
        Raises FrameError (after the frames before the bad prefix) when a size prefix is invalid."""
        if self._big is not None:
            self._big_got += nbytes
            if self._big_got < len(self._big):
                return
            frame = self._big
            self._big = self._big_view = None
            self._big_got = 0
            yield memoryview(frame), True
            return
        self._end += nbytes
        yield from self._cut()

    def _cut(self) -> Iterator[tuple[memoryview, bool]]:
        view = self._view
        while self._end - self._start >= 4:
            avail = self._end - self._start
            n = frame_length(view, self.max_bytes, self._start)
            if avail - 4 < n:
                if 4 + n > len(self._buf):           # too big for the buffer: give it its own
                    self._big = bytearray(n)
                    self._big_view = memoryview(self._big)
                    self._big_got = avail - 4
                    self._big_view[:self._big_got] = view[self._start + 4:self._end]
                    self._start = self._end = 0
                break
            start = self._start + 4
            self._start = start + n
            yield view[start:start + n], False
        if self._start == self._end:
            self._start = self._end = 0


def encode_frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload
