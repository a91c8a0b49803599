"""What validating every produced record costs: produce throughput with validation on and off.

Issue 15 made the broker check every record of every Produce request as Kafka's LogValidator does
(in native code, `pylog_native.validate_batches`, decompressing compressed batches). This runs the
same librdkafka producer against two pylog brokers, alternately, in the same run:

- `on`: the broker as shipped;
- `off`: the same broker started through `bench/_validation_off.py`, which swaps the record walk
  out for the header-only checks the broker made before (length, magic, CRC32C, size), i.e. the
  previous behaviour.

Cases: 100 B and 1 KB records, uncompressed and lz4 (librdkafka: linger.ms 5, batch.size 1 MB,
acks 1, one pre-built random payload), one partition. Reported: median records/s of `--reps`
runs per broker and case, the on/off ratio, and the broker's CPU microseconds per record.

With one Python client on 2 cores the client is the bottleneck and the broker's CPU per record is
below the clock's resolution, so `--append` also times the broker's own produce path in process,
without a client: `PartitionLog.append` of 1 MB batches (as librdkafka sends them) into a temporary
log, with and without the record walk, alternately; it reports records/s of the append path.

Usage:
  .venv/bin/python bench/produce_validation.py                # 3 reps, 300k x 100 B, 100k x 1 KB
  .venv/bin/python bench/produce_validation.py --reps 5 --records 500000
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

HERE = Path(__file__).resolve().parent


def worker(bootstrap: str, topic: str, count: int, size: int, codec: str) -> dict:
    from confluent_kafka import Producer

    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1024 * 1024, "acks": 1,
                  "compression.type": codec, "delivery.report.only.error": True,
                  "on_delivery": lambda err, _m: errors.append(str(err))})
    p.list_topics(topic, timeout=10)
    payload = os.urandom(size // 2) * 2       # half random: lz4 has something to do, as with real data
    started = time.perf_counter()
    _common.produce_all(p, topic, payload, count)
    left = p.flush(120)
    elapsed = time.perf_counter() - started
    return {"records_per_s": count / elapsed, "errors": len(errors) + left}


def measure(bp: _common.BrokerProc, topic: str, count: int, size: int, codec: str) -> dict:
    spec = json.dumps({"bootstrap": bp.bootstrap, "topic": topic, "count": count, "size": size, "codec": codec})
    user0, sys0 = _common.cpu_split(bp.proc.pid)
    out = subprocess.run([sys.executable, __file__, "--worker", spec], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    result = json.loads(out.stdout.strip().splitlines()[-1])
    user1, sys1 = _common.cpu_split(bp.proc.pid)
    result["broker_cpu_us_per_record"] = (user1 + sys1 - user0 - sys0) / count * 1e6
    # the record walk is user time; the kernel's page-cache writes (system time) swing with the VM's
    # first-touch cost of fresh memory (PLATFORM.md), whichever broker gets fresh pages
    result["broker_user_us_per_record"] = (user1 - user0) / count * 1e6
    if result["errors"]:
        raise RuntimeError(f"{result['errors']} records failed on {bp.bootstrap}")
    return result


def append_path(reps: int) -> int:
    """PartitionLog.append of 1 MB batches, record walk on and off, alternately; records/s (median)."""
    from broker.config import TopicConfig
    from broker.log import partition_log
    from kafka_protocol import record_batch
    from broker.log.partition_log import PartitionLog

    shipped = partition_log.validate_batches

    def headers_only(buf, max_batch_bytes, **_ignored):  # type: ignore[no-untyped-def]
        return record_batch.check_headers(buf, max_batch_bytes)

    print(f"{'case':<14}{'on rec/s':>14}{'off rec/s':>14}{'on/off':>8}")
    for size, codec in [(100, "none"), (1000, "none"), (100, "lz4"), (1000, "lz4")]:
        count = (1 << 20) // (size + 10)
        payload = os.urandom(size // 2) * 2
        batch = _common.encode_batch([payload] * count, codec=codec)
        rates: dict[str, list[float]] = {"on": [], "off": []}
        for rep in range(reps):
            for name in (("on", "off") if rep % 2 == 0 else ("off", "on")):
                partition_log.validate_batches = shipped if name == "on" else headers_only
                with tempfile.TemporaryDirectory() as d:
                    plog = PartitionLog(Path(d) / "t-0", "t", 0, TopicConfig.default(max_message_bytes=4 << 20),
                                        recover=False)
                    started = time.perf_counter()
                    for _ in range(50):
                        plog.append(batch)
                    rates[name].append(50 * count / (time.perf_counter() - started))
                    plog.close()
        partition_log.validate_batches = shipped
        on, off = statistics.median(rates["on"]), statistics.median(rates["off"])
        print(f"{size:>5} B {codec:<7}{on:>14,.0f}{off:>14,.0f}{on / off:>8.2f}")
    print(f"\nmachine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; reps {reps}, 50 x 1 MB batches each")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--records", type=int, default=300_000, help="records per 100 B run (1 KB runs: a third)")
    ap.add_argument("--append", action="store_true", help="time the in-process append path only")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--prefault-gib", type=float, default=0.0,
                    help="touch this much fresh memory first (the VM's first-touch cost, _common.prefault_memory)")
    args = ap.parse_args()
    if args.prefault_gib > 0:
        print(f"prefaulted {args.prefault_gib:g} GiB in {_common.prefault_memory(args.prefault_gib):.1f}s", flush=True)
    if args.worker:
        print(json.dumps(worker(**json.loads(args.worker))))
        return 0
    if args.append:
        return append_path(args.reps)
    work = Path(tempfile.mkdtemp(prefix="pylog-validation-bench-"))
    brokers = {
        "on": _common.start_pylog(work / "on"),
        "off": _common.start_pylog(work / "off", wrapper=[sys.executable, str(HERE / "_validation_off.py")]),
    }
    cases = [(100, "none"), (1000, "none"), (100, "lz4"), (1000, "lz4")]
    results: dict[tuple[int, str, str], list[dict]] = {}
    try:
        for rep in range(args.reps):
            for size, codec in cases:
                count = args.records if size == 100 else args.records // 3
                for name in (("on", "off") if rep % 2 == 0 else ("off", "on")):
                    topic = f"v-{size}-{codec}-{rep}"
                    _common.create_topic(brokers[name].bootstrap, topic, 1)
                    r = measure(brokers[name], topic, count, size, codec)
                    results.setdefault((size, codec, name), []).append(r)
                    print(f"rep {rep} {size:>5} B {codec:<4} {name:<3} {r['records_per_s']:>10,.0f} rec/s "
                          f"{r['broker_cpu_us_per_record']:.2f} broker us/rec "
                          f"({r['broker_user_us_per_record']:.2f} user)", flush=True)
    finally:
        for bp in brokers.values():
            bp.stop()
    # "paired": the median of each repetition's on/off, the two runs of a pair being back to back, so that
    # a machine-wide slow phase (the VM's first-touch cost, PLATFORM.md) falls on both runs of a pair
    print(f"\n{'case':<14}{'on rec/s':>12}{'off rec/s':>12}{'on/off':>8}{'paired':>8}{'on us/rec':>11}{'off us/rec':>11}"
          f"{'on user':>9}{'off user':>9}")
    for size, codec in cases:
        on = results[(size, codec, "on")]
        off = results[(size, codec, "off")]
        med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
        print(f"{size:>5} B {codec:<7}{med(on, 'records_per_s'):>12,.0f}{med(off, 'records_per_s'):>12,.0f}"
              f"{med(on, 'records_per_s') / med(off, 'records_per_s'):>8.2f}"
              f"{statistics.median(a['records_per_s'] / b['records_per_s'] for a, b in zip(on, off)):>8.2f}"
              f"{med(on, 'broker_cpu_us_per_record'):>11.2f}{med(off, 'broker_cpu_us_per_record'):>11.2f}"
              f"{med(on, 'broker_user_us_per_record'):>9.2f}{med(off, 'broker_user_us_per_record'):>9.2f}")
    print(f"\nmachine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; reps {args.reps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
