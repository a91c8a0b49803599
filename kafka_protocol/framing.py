"""Kafka request framing: a 4-byte big-endian size, then that many bytes. Sans I/O.

Owns `FrameReceiver`, the one framing state machine of the broker: it hands out the memory the next
received bytes go into (a reusable buffer; a frame larger than it gets a buffer of its own, filled
by the kernel directly), is told how many bytes arrived, and yields the complete frames, cut in
place. It enforces `socket.request.max.bytes` before allocating anything. `broker/connection.py`
drives it from asyncio's BufferedProtocol callbacks; the tests drive it by feeding bytes. Knows
nothing about sockets or about what is inside a frame.

Owns `RequestMemoryPool` too, Kafka's `queued.max.request.bytes`: a frame too big for the reusable
buffer must reserve its announced size from the broker-wide pool before any of it is buffered; when
the pool is exhausted the receiver waits (`waiting_for_memory`; the connection stops reading) until
memory is released. The reservation is only accounting: the frame's own buffer grows as its bytes
arrive, so a header announcing 100 MB costs nothing until 100 MB are actually sent.

Invariants: unconsumed bytes are `buf[start:end]`; at most one oversized frame is being received,
and while it is (or waits for memory), nothing else is buffered; a frame view from the reusable
buffer is valid only until the next `buffer()` call (`owned` says when the frame's memory is its
own and may be kept); an owned frame holds a reservation of exactly its length, which the consumer
gives back with `pool.release(len(frame))` once it is done with the frame.
"""
from __future__ import annotations

import struct
from typing import Callable, Iterator

SIZE = struct.Struct(">i")
READ_BUFFER_BYTES = 64 * 1024       # the reusable receive buffer (per connection)
MIN_FREE_BYTES = 16 * 1024          # compact the buffer when less than this is free at its end
FIRST_CHUNK_BYTES = 1024 * 1024     # an oversized frame's buffer starts here and doubles as bytes arrive


class RequestMemoryPool:
    """Bytes reserved by frames being received or waiting to be processed (`queued.max.request.bytes`).

    A reservation succeeds while the total stays within `capacity`, or when nothing is reserved (so a
    frame larger than the pool still gets through, alone, as in Kafka's SimpleMemoryPool). A negative
    capacity means no limit. `release` calls the waiters registered with `wait`, once each.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.reserved = 0
        self._waiters: list[Callable[[], None]] = []

    def try_reserve(self, n: int) -> bool:
        if self.capacity >= 0 and self.reserved > 0 and self.reserved + n > self.capacity:
            return False
        self.reserved += n
        return True

    def release(self, n: int) -> None:
        self.reserved -= n
        waiters, self._waiters = self._waiters, []
        for wake in waiters:
            wake()

    def wait(self, wake: Callable[[], None]) -> None:
        """Call `wake` at the next release (the caller then tries again)."""
        self._waiters.append(wake)

    def forget(self, wake: Callable[[], None]) -> None:
        if wake in self._waiters:
            self._waiters.remove(wake)


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

    def __init__(self, max_bytes: int, buffer_bytes: int = READ_BUFFER_BYTES,
                 pool: RequestMemoryPool | None = None) -> None:
        self.max_bytes = max_bytes
        self.pool = pool if pool is not None else RequestMemoryPool(-1)
        self._buf = bytearray(buffer_bytes)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None       # the oversized frame being received into its own buffer
        self._big_view: memoryview | None = None
        self._big_len = 0                        # its announced length (reserved from the pool)
        self._big_got = 0
        self.waiting_for_memory = False          # an oversized frame's reservation failed; call `retry`

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a yielded frame."""
        return self._big_got if self._big is not None else self._end - self._start

    @property
    def allocated(self) -> int:
        """Bytes of memory this receiver holds (the reusable buffer and an oversized frame's buffer)."""
        return len(self._buf) + (len(self._big) if self._big is not None else 0)

    def buffer(self) -> memoryview:
        """Where the next received bytes go (never empty)."""
        if self._big is not None:
            if self._big_got == len(self._big):
                self._grow()
            assert self._big_view is not None
            return self._big_view[self._big_got:]
        if len(self._buf) - self._end < MIN_FREE_BYTES and self._start > 0:
            n = self._end - self._start
            self._view[:n] = self._view[self._start:self._end]
            self._start, self._end = 0, n
        return self._view[self._end:]

    def _grow(self) -> None:
        """Double the oversized frame's buffer (up to its announced length): memory follows the bytes.

        A new buffer, copied into (the old one may still be exported to the transport); doubling keeps
        the copies below the frame's size in total."""
        assert self._big is not None and self._big_view is not None
        bigger = bytearray(min(2 * len(self._big), self._big_len))
        bigger[:self._big_got] = self._big_view[:self._big_got]
        self._big_view.release()
        self._big, self._big_view = bigger, memoryview(bigger)

    def received(self, nbytes: int) -> Iterator[tuple[memoryview, bool]]:
        """The frames completed by `nbytes` new bytes in `buffer()`, as (frame, owned), in order.
        Raises FrameError (after the frames before the bad prefix) when a size prefix is invalid."""
        if self._big is not None:
            self._big_got += nbytes
            if self._big_got < self._big_len:
                return
            frame = self._big
            self._big = self._big_view = None
            self._big_got = self._big_len = 0
            yield memoryview(frame), True
            return
        self._end += nbytes
        yield from self._cut()

    def close(self) -> None:
        """Drop what is buffered, giving back a partial oversized frame's reservation."""
        if self._big is not None:
            self.pool.release(self._big_len)
            self._big = self._big_view = None
            self._big_got = self._big_len = 0
        self._start = self._end = 0
        self.waiting_for_memory = False

    def retry(self) -> Iterator[tuple[memoryview, bool]]:
        """After memory was released: try the waiting frame's reservation again (frames it completes)."""
        if self.waiting_for_memory:
            yield from self._cut()

    def _cut(self) -> Iterator[tuple[memoryview, bool]]:
        view = self._view
        while self._end - self._start >= 4:
            avail = self._end - self._start
            n = frame_length(view, self.max_bytes, self._start)
            if avail - 4 < n:
                if 4 + n > len(self._buf):           # too big for the buffer: give it its own
                    self.waiting_for_memory = not self.pool.try_reserve(n)
                    if self.waiting_for_memory:
                        return
                    got = avail - 4
                    self._big = bytearray(min(n, max(FIRST_CHUNK_BYTES, got)))
                    self._big_view = memoryview(self._big)
                    self._big_len, self._big_got = n, got
                    self._big_view[:got] = view[self._start + 4:self._end]
                    self._start = self._end = 0
                break
            start = self._start + 4
            self._start = start + n
            yield view[start:start + n], False
        if self._start == self._end:
            self._start = self._end = 0


def encode_frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload
