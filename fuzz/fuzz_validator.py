"""Coverage-guided fuzz target (atheris): the produce-side batch validator and what consumers read back.

Input: byte 0 chooses the options of `kafka_protocol.record_batch.validate_batches` (bit 0 `compacted`,
bit 1 `create_time`, bits 2-3 `max.message.bytes`: 1 MiB, 64 KiB, 1024, 100); the rest is one
partition's record set as a producer sent it. Seeds (`fuzz/corpus/validator`) are valid batches of
every codec and every catalogued bad batch (tests/support/bad_batches.py); the custom mutator mixes
libFuzzer's byte edits with batch-aware ones (a batch edited with its CRC fixed, so the fuzzer gets
past the CRC check; batches concatenated).

Allowed: the `KafkaError`s the validator documents (CorruptRecordError, InvalidRecordError,
RecordValidationError, MessageTooLargeError, UnsupportedMessageFormatError). On success, a validated
record set must be readable by every consumer: `pylog_native.decode_batches` (CRC checked) reads
all of it, with exactly sum(records_count) rows, both as sent and after the broker's
`assign_offsets` (base offsets rewritten, LogAppendTime applied) gave it offsets; offsets then run
consecutively from the base. Anything else is a finding (the native validator is Rust: its own
coverage-guided target is native/fuzz/fuzz_targets/validate.rs).

Run: `python -m fuzz.fuzz_validator /tmp/fuzzwork/validator fuzz/corpus/validator -max_total_time=600`
"""
from __future__ import annotations

import random
import struct
import sys

import atheris

with atheris.instrument_imports(include=["broker"]):
    import crc32c
    import pylog_native
    from kafka_protocol.errors import (CorruptRecordError, InvalidRecordError, MessageTooLargeError, RecordValidationError,
                               UnsupportedMessageFormatError)
    from kafka_protocol.record_batch import assign_offsets, validate_batches

ALLOWED = (CorruptRecordError, InvalidRecordError, RecordValidationError, MessageTooLargeError,
           UnsupportedMessageFormatError)
MAX_BATCH_BYTES = (1 << 20, 64 << 10, 1024, 100)
ALL = (-(1 << 63), (1 << 63) - 1)
_I32 = struct.Struct(">i")


def TestOneInput(data: bytes) -> None:
    if not data:
        return
    opts, buf = data[0], data[1:]
    max_batch_bytes = MAX_BATCH_BYTES[(opts >> 2) & 3]
    try:
        headers = validate_batches(buf, max_batch_bytes, compacted=bool(opts & 1), create_time=bool(opts & 2))
    except ALLOWED:
        return
    rows = sum(h.records_count for h in headers)
    d = pylog_native.decode_batches(buf, *ALL, include_headers=True, verify_crc=True)
    assert d["consumed"] == len(buf), f"validated {len(buf)} bytes, consumers read {d['consumed']}"
    assert d["rows"] == rows, f"validated {rows} records, consumers read {d['rows']}"
    stored = bytearray(buf)
    base = 1000 + (opts >> 4)
    assign_offsets(stored, headers, base, 1_700_000_000_000 if opts & 0x40 else None, 0)
    d = pylog_native.decode_batches(stored, *ALL, include_headers=True, verify_crc=True)
    assert d["consumed"] == len(stored) and d["rows"] == rows, (d["consumed"], d["rows"], rows)
    offsets = memoryview(d["offset"]).cast("q").tolist()
    assert offsets == list(range(base, base + rows)), "stored offsets are not consecutive from the base"


def _fix_crcs(b: bytearray) -> None:
    """Recompute the CRC32C of every batch whose length fits, so edits reach past the CRC check."""
    pos = 0
    while len(b) - pos >= 61:
        (length,) = _I32.unpack_from(b, pos + 8)
        end = pos + 12 + length
        if length < 49 or end > len(b):
            return
        struct.pack_into(">I", b, pos + 17, crc32c.crc32c(bytes(b[pos + 21:end])))
        pos = end


def CustomMutator(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    if len(data) < 2:
        return atheris.Mutate(data, max_size)
    head, body = data[:1], data[1:]
    r = rng.random()
    if r < 0.1:
        head = bytes([rng.randrange(256)])
    elif r < 0.2:
        body = body + body[:max(0, max_size - len(data))]        # two copies of the record set
    else:
        body = atheris.Mutate(body, max(len(body), min(max_size - 1, len(body) + 64)))
    if rng.random() < 0.7:
        fixed = bytearray(body)
        _fix_crcs(fixed)
        body = bytes(fixed)
    return (head + body)[:max_size]


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput, custom_mutator=CustomMutator)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
