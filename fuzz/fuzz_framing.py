"""Coverage-guided fuzz target (atheris): the sans-I/O connection, bytes → frames → decoded requests.

Input: byte 0 chooses the limits (bits 0-1 `socket.request.max.bytes`: 64, 300, 2048, 65536; bits 2-3
the receive buffer: 16, 64, 256, 4096 bytes; bits 4-6 the shared `RequestMemoryPool`'s capacity:
unlimited, 0, 100, 1000, 4096), bytes 1-3 seed the schedule, the rest is the byte stream a client
sends. Two `FrameReceiver`s (two connections sharing the pool, as in the broker) receive the same
stream in different, arbitrary chunk sizes; owned (oversized) frames are kept for a while and released
in an arbitrary order; a receiver waiting for memory is fed nothing until a release wakes it, as
`broker/connection.py` does. Every complete frame goes through what the connection runs:
`peek_header`, `supported`, `decode_request`.

Allowed: `FrameError` (the stream cannot be framed: the connection closes) and `MalformedRequestError`.
Asserted: each receiver yields exactly the frames a reference parser finds in the bytes it was fed,
and fails exactly when that parser finds an invalid size prefix; no frame exceeds max_bytes; the
receive buffer offered is never empty; a receiver holds at most buffer + max_bytes of memory; the
pool never goes negative and is back to 0 once the owned frames are released and the receivers closed.

Run: `python -m fuzz.fuzz_framing /tmp/fuzzwork/framing fuzz/corpus/framing -max_total_time=600`
(see fuzz/README.md).
"""
from __future__ import annotations

import random
import sys

import atheris

with atheris.instrument_imports(include=["broker"]):
    from broker.apis.registry import supported
    from kafka_protocol.api_keys import ApiKey
    from kafka_protocol.codec import MalformedRequestError, decode_request, peek_header, request_schema
    from kafka_protocol.framing import FrameError, FrameReceiver, RequestMemoryPool

MAX_BYTES = (64, 300, 2048, 1 << 16)
BUFFER_BYTES = (16, 64, 256, 4096)
POOL_CAPACITY = (-1, 0, 100, 1000, 4096, -1, 1000, 100)


def process(frame: memoryview) -> None:
    """What `Connection._process` does with a frame before calling the handler."""
    try:
        api_key, version, _ = peek_header(frame)
    except MalformedRequestError:
        return
    api = supported(api_key, version)
    if api is None:
        return
    data: memoryview | bytes = frame if api_key == ApiKey.PRODUCE else bytes(frame)
    try:
        decode_request(data, request_schema(api_key, version))
    except MalformedRequestError:
        pass


def reference_frames(fed: bytes, max_bytes: int) -> tuple[list[bytes], bool]:
    """The complete frames in `fed` and whether an invalid size prefix was reached."""
    frames, i = [], 0
    while len(fed) - i >= 4:
        n = int.from_bytes(fed[i:i + 4], "big", signed=True)
        if n < 0 or n > max_bytes:
            return frames, True
        if len(fed) - i - 4 < n:
            break
        frames.append(fed[i + 4:i + 4 + n])
        i += 4 + n
    return frames, False


class _Conn:
    def __init__(self, rx: FrameReceiver, pool: RequestMemoryPool, decode: bool, rng: random.Random,
                 held: list[int]) -> None:
        self.rx, self.pool, self.decode, self.rng, self.held = rx, pool, decode, rng, held
        self.pos = 0
        self.frames: list[bytes] = []
        self.failed = False

    def take(self, frames: object) -> None:
        try:
            for frame, owned in frames:  # type: ignore[attr-defined]
                assert len(frame) <= self.rx.max_bytes, (len(frame), self.rx.max_bytes)
                self.frames.append(bytes(frame))
                if self.decode:
                    process(frame)
                if owned:
                    assert self.pool.reserved >= len(frame)
                    if self.rng.random() < 0.5:
                        self.pool.release(len(frame))
                    else:
                        self.held.append(len(frame))
        except FrameError:
            self.failed = True
            self.rx.close()
        if not self.failed and self.rx.waiting_for_memory:
            self.pool.wait(self.wake)

    def wake(self) -> None:
        if not self.failed:
            self.take(self.rx.retry())

    def can_feed(self, stream: bytes) -> bool:
        return not self.failed and not self.rx.waiting_for_memory and self.pos < len(stream)

    def feed(self, stream: bytes) -> None:
        buf = self.rx.buffer()
        assert len(buf) > 0, "buffer() must never be empty"
        r = self.rng.random()
        chunk = 1 if r < 0.2 else self.rng.randint(1, 8) if r < 0.5 else self.rng.randint(1, 300) if r < 0.8 else len(buf)
        n = min(len(buf), chunk, len(stream) - self.pos)
        buf[:n] = stream[self.pos:self.pos + n]
        self.pos += n
        self.take(self.rx.received(n))
        assert self.rx.allocated <= len(self.rx._buf) + self.rx.max_bytes


def TestOneInput(data: bytes) -> None:
    if len(data) < 4:
        return
    cfg, stream = data[0], data[4:]
    rng = random.Random(int.from_bytes(data[1:4], "little"))
    max_bytes = MAX_BYTES[cfg & 3]
    buffer_bytes = BUFFER_BYTES[(cfg >> 2) & 3]
    pool = RequestMemoryPool(POOL_CAPACITY[(cfg >> 4) & 7])
    held: list[int] = []
    conns = [_Conn(FrameReceiver(max_bytes, buffer_bytes, pool), pool, i == 0, rng, held) for i in range(2)]
    while True:
        assert pool.reserved >= 0
        ready = [c for c in conns if c.can_feed(stream)]
        if held and (not ready or rng.random() < 0.1):
            rng.shuffle(held)
            pool.release(held.pop())
            continue
        if not ready:
            break
        rng.choice(ready).feed(stream)
    while held:
        pool.release(held.pop())
    for c in conns:
        expected, bad = reference_frames(stream[:c.pos], max_bytes)
        assert c.frames == expected, f"frames differ from the reference: {len(c.frames)} vs {len(expected)}"
        assert c.failed == bad, f"FrameError raised: {c.failed}, expected: {bad}"
        c.rx.close()
        pool.forget(c.wake)
    assert pool.reserved == 0, f"{pool.reserved} bytes still reserved after every frame was released"


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
