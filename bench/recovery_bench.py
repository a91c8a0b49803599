"""Recovery benchmark: time PartitionLog recovery of a 1 GB tail segment of 16 KB batches.

Writes the segment through the normal append path, shuts down cleanly, removes the clean-shutdown
marker (as a crash would leave things), then times LogManager.startup, which recovers the tail
segment: validates every batch (length, magic, CRC32C, offsets), truncates nothing, rebuilds the
indexes. Prints the seconds. The data is in the page cache (warm), as after a process crash.

Usage: python bench/recovery_bench.py [--size-mb 1024] [--batch-kb 16] [--dir DIR]
"""
from __future__ import annotations

import argparse
import struct
import sys
import tempfile
import time
from pathlib import Path

import crc32c

from broker.config import TopicConfig
from broker.log import LogManager

_AFTER_CRC = struct.Struct(">hiqqqhii")


def make_batch(size: int) -> bytes:
    """One uncompressed v2 batch of exactly `size` bytes holding a single record."""
    for value_len in range(size - 61, size - 61 - 40, -1):
        body = b"\x00" + _varint(0) + _varint(0) + _varint(-1) + _varint(value_len) + b"x" * value_len + _varint(0)
        record = _varint(len(body)) + body
        if 61 + len(record) == size:
            after_crc = _AFTER_CRC.pack(0, 0, 1_700_000_000_000, 1_700_000_000_000, -1, -1, -1, 1) + record
            head = struct.pack(">qiibI", 0, size - 12, -1, 2, crc32c.crc32c(after_crc))
            return head + after_crc
    raise ValueError(size)


def _varint(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--batch-kb", type=int, default=16)
    ap.add_argument("--dir", type=Path, default=None, help="parent of the temporary data dir")
    args = ap.parse_args()
    batch = make_batch(args.batch_kb * 1024)
    count = args.size_mb * 1024 * 1024 // len(batch)
    config = TopicConfig.default(segment_bytes=2**31 - 1)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        data_dir = Path(tmp)
        writer = LogManager(data_dir)
        writer.startup({})
        plog = writer.create("bench", 0, config)
        started = time.monotonic()
        for _ in range(count):
            plog.append(batch)
        write_s = time.monotonic() - started
        writer.shutdown()
        (data_dir / LogManager.CLEAN_SHUTDOWN_FILE).unlink()

        started = time.monotonic()
        reader = LogManager(data_dir)
        reader.startup({"bench": config})
        recover_s = time.monotonic() - started
        recovered = reader.get("bench", 0)
        assert recovered is not None and recovered.log_end_offset == count, "recovery lost batches"
        size = recovered.size_in_bytes()
        reader.shutdown()
    print(f"wrote {count} batches ({size / 2**20:.0f} MiB) in {write_s:.2f}s "
          f"({size / 2**20 / write_s:.0f} MiB/s through PartitionLog.append)", file=sys.stderr)
    print(f"recovery of a {size / 2**20:.0f} MiB tail segment of {len(batch) // 1024} KB batches: "
          f"{recover_s:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
