"""Tiered storage (issue 30): a full read of a topic whose log is almost all in remote storage, through pylog's
broker against the same read through Apache Kafka 3.9's, the same store kind on both, alternating.

Both brokers tier to a local directory: pylog with `remote.log.storage.url` a path, Kafka through
LocalTieredStorage, the RemoteStorageManager it ships for its tests (kafka-storage's test jar, as
tests/conformance/test_tiered_storage_vs_kafka.py), with its segment metadata in __remote_log_metadata. The same
one-partition topic on each (segment.bytes 8 MiB, remote.storage.enable, local.retention.bytes 1 MiB), the same
`pylog perf produce` of --records x 100 B into each; once each has uploaded every closed segment and its disk keeps
less than --local-share of the records, `pylog perf consume` reads every record from offset 0 (librdkafka, the same
client on both, with the tool's fetch.queue.backoff.ms of 10 ms), --warmup times per broker unmeasured, then --reps
times per broker in alternating order, with each broker's CPU time over its read.

Usage:
  .venv/bin/python bench/tiered_fetch_bench.py --records 2000000 --reps 5 [--out FILE]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from peers.kafka import KafkaBroker, local_tiered_storage  # noqa: E402
from pylog.launch.process import BrokerProcess  # noqa: E402

PYLOG = [sys.executable, "-m", "pylog"]
TOPIC_CONFIG = {"segment.bytes": str(8 << 20), "remote.storage.enable": "true", "local.retention.bytes": str(1 << 20)}


def _perf(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(PYLOG + ["perf", *args, "--json", "--no-progress"], capture_output=True, text=True,
                         timeout=1800, check=True).stdout
    return json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _local_start(log_dir: Path) -> int:
    return min(int(f.stem) for f in log_dir.glob("*.log"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=2_000_000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--local-share", type=float, default=0.1, help="wait until the disks keep less than this share")
    p.add_argument("--warmup", type=int, default=2, help="unmeasured full reads per broker first (default 2)")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    load_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="pylog-tiered-fetch-bench-"))
    (work / "rsm").mkdir()
    kafka = KafkaBroker(work / "kafka", settings=local_tiered_storage(work / "rsm")).start()
    pylog = BrokerProcess(work / "pylog", settings={
        "remote.log.storage.system.enable": "true", "remote.log.storage.url": str(work / "pylog-remote"),
        "remote.log.manager.task.interval.ms": 500, "log.retention.check.interval.ms": 500}).start()
    brokers = {"pylog": (pylog, pylog.data_dir / "t-0"), "kafka": (kafka, kafka.workdir / "logs" / "t-0")}
    rows: list[dict[str, Any]] = []
    try:
        for name, (broker, _) in brokers.items():
            config = [x for k, v in TOPIC_CONFIG.items() for x in ("--config", f"{k}={v}")]
            subprocess.run(PYLOG + ["topics", "create", "--bootstrap-server", broker.bootstrap, "--topic", "t",
                                    "--partitions", "1", *config], check=True, capture_output=True, timeout=60)
            produced = _perf(["produce", "--bootstrap-server", broker.bootstrap, "--topic", "t", "--num-records",
                              str(args.records), "--record-size", "100", "--throughput", "-1"])
            print(json.dumps({"broker": name, "produce": produced}), flush=True)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not all(
                _local_start(log) >= args.records * (1 - args.local_share) for _, log in brokers.values()):
            time.sleep(1)
        starts = {name: _local_start(log) for name, (_, log) in brokers.items()}
        print(json.dumps({"local_start": starts}), flush=True)
        for name, (broker, _) in brokers.items():        # warm-up reads, not measured: Kafka's JIT, both caches
            for _ in range(args.warmup):
                _perf(["consume", "--bootstrap-server", broker.bootstrap, "--topic", "t", "--messages",
                       str(args.records), "--timeout-ms", "120000"])
        for rep in range(args.reps):
            for name in (("pylog", "kafka") if rep % 2 == 0 else ("kafka", "pylog")):
                broker, _ = brokers[name]
                load = os.getloadavg()[0]
                cpu = _cpu_s(broker.proc.pid)
                read = _perf(["consume", "--bootstrap-server", broker.bootstrap, "--topic", "t", "--messages",
                              str(args.records), "--timeout-ms", "120000"])
                row = {"broker": name, "rep": rep, "load_before": round(load, 2),
                       "broker_cpu_s": round(_cpu_s(broker.proc.pid) - cpu, 2), "consume": read}
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        pylog.close()
        kafka.close()
    summary: dict[str, Any] = {}
    for name in brokers:
        mine = [r for r in rows if r["broker"] == name]
        summary[name] = {"records_per_s": sorted(r["consume"].get("records_per_sec", 0) for r in mine),
                         "broker_cpu_s": sorted(r["broker_cpu_s"] for r in mine)}
    pairs = [a["consume"]["records_per_sec"] / b["consume"]["records_per_sec"] for a, b in zip(
        [r for r in rows if r["broker"] == "pylog"], [r for r in rows if r["broker"] == "kafka"])]
    summary["pylog_over_kafka_per_rep"] = [round(x, 3) for x in pairs]
    summary["median_ratio"] = round(statistics.median(pairs), 3) if pairs else None
    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "records": args.records,
              "warmup": args.warmup, "load_start": load_start,
              "local_start": starts, "summary": summary, "rows": rows}
    print(json.dumps(result["summary"]))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
