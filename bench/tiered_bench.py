"""Tiered storage (issue 30): produce throughput with tiering on against off, and a full read from the bucket
against the same read from the local disk, on one pylog broker and one MinIO, alternating within each repetition.

Each repetition, for `off` then `on` (or the reverse on odd repetitions): a fresh broker, a one-partition topic
(segment.bytes 16 MiB; with tiering, remote.storage.enable and local.retention.bytes 32 MiB), `pylog perf
produce` of --records records of 100 bytes (acks=1), then, once the uploads are done (tiering on: every closed
segment in the bucket and the disk down to its last 32 MiB), `pylog perf consume` of every record from offset 0:
on the tiered topic nearly all of it comes from the bucket through the broker's remote read path.

`--store dir` tiers to a local directory instead of MinIO (remote.log.storage.url a path): the broker's own cost
of tiering (reading closed segments and writing them elsewhere), without an object store sharing the machine's
cores.

Usage:
  .venv/bin/python bench/tiered_bench.py --records 1000000 --reps 3 [--store dir]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from pylog.launch.object_store import LocalObjectStore  # noqa: E402
from pylog.launch.process import BrokerProcess  # noqa: E402

PYLOG = [sys.executable, "-m", "pylog"]


def _perf(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(PYLOG + ["perf", *args, "--json", "--no-progress"], capture_output=True, text=True,
                         timeout=900, check=True).stdout
    return json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])


def _local_start(broker: BrokerProcess, topic: str) -> int:
    return min(int(f.stem) for f in (broker.data_dir / f"{topic}-0").glob("*.log"))


def one(mode: str, rep: int, records: int, store: LocalObjectStore | None, work: Path) -> dict[str, Any]:
    tiered = mode == "on"
    settings: dict[str, object] = {"log.retention.check.interval.ms": 500}
    if tiered:
        url = f"s3://bench/run-{rep}-{time.time_ns()}" if store is not None else str(work / f"remote-{rep}")
        settings.update({"remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": 500,
                         "remote.log.storage.url": url})
    broker = BrokerProcess(work / f"{mode}-{rep}", settings=settings).start()
    try:
        config = ["--config", "segment.bytes=16777216"]
        if tiered:
            config += ["--config", "remote.storage.enable=true", "--config", "local.retention.bytes=33554432"]
        subprocess.run(PYLOG + ["topics", "create", "--bootstrap-server", broker.bootstrap, "--topic", "t",
                                "--partitions", "1", *config], check=True, capture_output=True, timeout=60)
        load = os.getloadavg()[0]
        produced = _perf(["produce", "--bootstrap-server", broker.bootstrap, "--topic", "t", "--num-records",
                          str(records), "--record-size", "100", "--throughput", "-1"])
        if tiered:
            deadline = time.monotonic() + 300
            while _local_start(broker, "t") < records * 0.5 and time.monotonic() < deadline:
                time.sleep(0.5)
        consumed = _perf(["consume", "--bootstrap-server", broker.bootstrap, "--topic", "t", "--messages",
                          str(records), "--timeout-ms", "120000"])
        return {"mode": mode, "rep": rep, "load_before": round(load, 2), "local_start": _local_start(broker, "t"),
                "produce": produced, "consume": consumed}
    finally:
        broker.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--store", choices=("minio", "dir"), default="minio",
                   help="where tiered segments go: a MinIO on this machine (default) or a local directory")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pylog-tiered-bench-"))
    store = LocalObjectStore(work / "minio").start() if args.store == "minio" else None
    if store is not None:
        store.create_bucket("bench")
        os.environ.update(store.env())
    results = []
    try:
        for rep in range(args.reps):
            for mode in (("off", "on") if rep % 2 == 0 else ("on", "off")):
                r = one(mode, rep, args.records, store, work)
                results.append(r)
                print(json.dumps(r), flush=True)
    finally:
        if store is not None:
            store.stop()
    summary = {}
    for mode in ("off", "on"):
        rows = [r for r in results if r["mode"] == mode]
        summary[mode] = {"produce_mb_s": sorted(r["produce"].get("mb_per_sec", 0) for r in rows),
                         "consume_mb_s": sorted(r["consume"].get("mb_per_sec", 0) for r in rows)}
    print(json.dumps({"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "records": args.records,
                      "store": args.store, "summary": summary}))


if __name__ == "__main__":
    main()
