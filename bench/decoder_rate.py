"""The native record batch decoder's own rate, outside Spark, on one core.

    .venv/bin/python bench/decoder_rate.py [--records 2000000] [--size 100] [--codec lz4]

Builds one partition's worth of v2 record batches (1,000 records each, like a producer with a
large batch.size), then times `sparklog.native_decoder.decode_range` over all of it, several rounds,
and prints records/s and GB/s of record bytes (uncompressed key+value). The input is built in memory
with the broker's record encoder (bench/_common.encode_batch); no broker is involved.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _common  # noqa: E402
from sparklog.native_decoder import decode_range  # noqa: E402
from sparklog.schema import arrow_schema  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--codec", default="lz4")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    per_batch = 1000
    value = os.urandom(args.size // 2).hex().encode()[: args.size]
    one = [_common.encode_batch([value] * per_batch, keys=[b"key-%05d" % i for i in range(per_batch)],
                                codec=args.codec)]
    # the same batch content at increasing base offsets (base offset is outside the CRC)
    data = bytearray()
    for b in range(args.records // per_batch):
        batch = bytearray(one[0])
        batch[0:8] = (b * per_batch).to_bytes(8, "big")
        data += batch
    data = bytes(data)
    schema = arrow_schema(False)
    payload = args.records * (len(value) + 9)
    times = []
    for _ in range(args.rounds):
        t = time.perf_counter()
        got = decode_range(data, "t", 0, 0, args.records, schema, include_headers=False)
        times.append(time.perf_counter() - t)
        assert got.batch.num_rows == args.records
    best, median = min(times), sorted(times)[len(times) // 2]
    print(f"{args.records} records x {args.size} B, {args.codec}, {len(data) / 1e6:.1f} MB in: "
          f"median {median * 1000:.0f} ms = {args.records / median / 1e6:.2f} M rec/s, "
          f"{payload / median / 1e9:.2f} GB/s (best {args.records / best / 1e6:.2f} M rec/s)")


if __name__ == "__main__":
    main()
