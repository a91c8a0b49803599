"""Metrics overhead (issue 29): pylog with its Prometheus endpoint on and scraped every second, against metrics off.

Two pylog brokers, each with its default settings: "off" (no `metrics.port`) and "on" (`metrics.port` set, a
scraper in this process fetching /metrics every second for the whole run, as Prometheus with a 1 s interval
would; each broker also holds a 100-partition idle topic, so a scrape reports a realistic number of series).
Each round, alternating which broker goes first: a fresh topic of `--partitions` partitions, a librdkafka
producer writes `--records` records of `--size` bytes (acks=all, linger.ms 5, batch.size 1 MB), then a consumer
reads them back; each in a fresh client process (the workers of bench/security_bench.py, run as scripts), with the
broker's CPU per record; the topic is deleted after each round. Figure: on / off for produce and consume (target >= 0.98), the ratio of the medians and
the per-round ratios' min-max; beside it the scrapes' time and size.

Usage:
  .venv/bin/python bench/metrics_bench.py                    # 7 rounds, about 2 minutes on 2 cores
  .venv/bin/python bench/metrics_bench.py --rounds 3 --records 100000

Writes JSON to bench/results/metrics_bench-<date>.json (or --out).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import _common
from _common import REPO, create_topic, delete_topic, free_port, prefault_memory, start_pylog

WORKER = REPO / "bench" / "security_bench.py"


def measure(spec: dict, broker_pid: int) -> dict:
    """One produce or consume in a fresh client process, with the broker's CPU meanwhile."""
    cpu0 = _common.cpu_seconds(broker_pid)
    out = subprocess.run([sys.executable, str(WORKER), "--worker", "--worker-spec", json.dumps(spec)],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"worker failed: {(out.stderr or out.stdout)[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["broker_cpu_us_per_record"] = (_common.cpu_seconds(broker_pid) - cpu0) / spec.get(
        "count", spec.get("expected", 1)) * 1e6
    return result


class Scraper(threading.Thread):
    """GET /metrics every `interval_s`, keeping each scrape's seconds and bytes."""

    def __init__(self, port: int, interval_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.url, self.interval_s = f"http://127.0.0.1:{port}/metrics", interval_s
        self.stop = threading.Event()
        self.seconds: list[float] = []
        self.sizes: list[int] = []
        self.failures = 0

    def run(self) -> None:
        while not self.stop.wait(self.interval_s):
            started = time.perf_counter()
            try:
                body = urllib.request.urlopen(self.url, timeout=10).read()
            except OSError:
                self.failures += 1
                continue
            self.seconds.append(time.perf_counter() - started)
            self.sizes.append(len(body))


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    stamp = dt.datetime.now(dt.timezone.utc)
    out = args.out or REPO / "bench" / "results" / f"metrics_bench-{stamp:%Y-%m-%d-%H%M%S}.json"
    prefault_memory(2.0)          # recycled pages for both brokers (PLATFORM.md: first touches are slow here)
    load_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="metrics-bench-"))
    metrics_port = free_port()
    brokers = {"off": start_pylog(work / "off"), "on": start_pylog(work / "on", sets=[f"metrics.port={metrics_port}"])}
    scraper = Scraper(metrics_port)
    rounds: list[dict] = []
    try:
        for b in brokers.values():
            create_topic(b.bootstrap, "idle", 100)
        scraper.start()
        for r in range(args.rounds):
            order = ["off", "on"] if r % 2 == 0 else ["on", "off"]
            row: dict = {"load1": os.getloadavg()[0]}
            for name in order:
                b = brokers[name]
                topic = f"bench-{r}"
                create_topic(b.bootstrap, topic, args.partitions)
                conf = {"bootstrap.servers": b.bootstrap}
                produced = measure({"kind": "produce", "conf": conf, "topic": topic, "count": args.records,
                                    "size": args.size}, b.proc.pid)
                consumed = measure({"kind": "consume", "conf": conf, "topic": topic, "partitions": args.partitions,
                                    "expected": args.records + 1, "size": args.size}, b.proc.pid)
                row[name] = {"produce": produced, "consume": consumed}
                delete_topic(b.bootstrap, topic)        # the disk and page cache do not grow round after round
                print(f"  round {r + 1}/{args.rounds} {name:3}: produce {produced['records_per_s']:,.0f} rec/s "
                      f"({produced['broker_cpu_us_per_record']:.2f} us/rec), consume "
                      f"{consumed['records_per_s']:,.0f} rec/s; load {row['load1']:.1f}", flush=True)
            rounds.append(row)
    finally:
        scraper.stop.set()
        codes = {name: b.stop() for name, b in brokers.items()}
    result: dict = {"benchmark": "metrics_bench", "date": stamp.isoformat(), "command": " ".join(sys.argv),
                    "machine": {"nproc": os.cpu_count(), "python": platform.python_version()},
                    "settings": vars(args) | {"out": str(out)}, "loadavg_start": load_start,
                    "loadavg_end": os.getloadavg(), "broker_exit_codes": codes, "rounds": rounds,
                    "scrapes": {"count": len(scraper.seconds), "failures": scraper.failures,
                                "seconds": summary(scraper.seconds) if scraper.seconds else None,
                                "bytes": summary([float(s) for s in scraper.sizes]) if scraper.sizes else None}}
    for op in ("produce", "consume"):
        on = [row["on"][op]["records_per_s"] for row in rounds]
        off = [row["off"][op]["records_per_s"] for row in rounds]
        per_round = [a / b for a, b in zip(on, off)]
        result[op] = {"on": summary(on), "off": summary(off), "ratio_of_medians": statistics.median(on) /
                      statistics.median(off), "per_round": summary(per_round),
                      "broker_cpu_us_per_record": {n: statistics.median(row[n][op]["broker_cpu_us_per_record"]
                                                                         for row in rounds) for n in ("on", "off")}}
        print(f"{op}: metrics on/off {result[op]['ratio_of_medians']:.3f} (per round: median "
              f"{result[op]['per_round']['median']:.3f}, {result[op]['per_round']['min']:.3f}-"
              f"{result[op]['per_round']['max']:.3f}) (target >= 0.98); on {statistics.median(on):,.0f}, off "
              f"{statistics.median(off):,.0f} rec/s; broker us/rec on {result[op]['broker_cpu_us_per_record']['on']:.2f}, "
              f"off {result[op]['broker_cpu_us_per_record']['off']:.2f}")
    s = result["scrapes"]
    if s["seconds"]:
        print(f"scrapes: {s['count']} ({s['failures']} failed), {s['seconds']['median'] * 1000:.1f} ms median, "
              f"{s['seconds']['max'] * 1000:.1f} ms max, {s['bytes']['median'] / 1024:.0f} KiB")
    print(f"load {list(load_start)} -> {list(os.getloadavg())}")
    _common.write_json(out, result)
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
