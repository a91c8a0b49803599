"""Direct reads (issue 30, part 4): a Spark batch read of a tiered topic's old offsets, executors reading the bucket
themselves (`remoteStorage`) against the same read through the broker (`directReads=false`), alternating.

One MinIO, one pylog broker with tiered storage, one topic of --partitions partitions (segment.bytes and
local.retention.bytes 16 MiB, so nearly all of it lives only in the bucket once uploaded), `pylog perf produce` of
--records records of 100 bytes. Then --reps repetitions of both reads in one local[2] SparkSession (order swapped
every repetition): `spark.read.format("pylog")` of the whole topic, `count(*)` and `sum(length(value))` collected,
timed from the action to its result; both must see every record. Also the broker's CPU seconds during each read
(through the broker, the broker does the remote reads; direct, it only answers metadata) and the broker's
pylog_remote_fetch_bytes_total (0 for the direct reads).

Usage:
  .venv/bin/python bench/direct_reads_bench.py                      # 4,000,000 records, 4 partitions, 5 reps
  .venv/bin/python bench/direct_reads_bench.py --records 1000000 --reps 3
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench._common import cpu_seconds, spark_env  # noqa: E402
from pylog.launch.object_store import LocalObjectStore  # noqa: E402
from pylog.launch.process import BrokerProcess  # noqa: E402

PYLOG = [sys.executable, "-m", "pylog"]
SEGMENT = 16 * 1024 * 1024


def _local_bytes(broker: BrokerProcess, topic: str, partitions: int) -> int:
    return sum(f.stat().st_size for p in range(partitions) for f in (broker.data_dir / f"{topic}-{p}").glob("*.log"))


def _remote_fetch_bytes(broker: BrokerProcess) -> float:
    port = re.findall(r"metrics \(Prometheus\) on http://[^:]+:(\d+)/metrics", broker.log_text())[-1]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return float(re.search(r"^pylog_remote_fetch_bytes_total (\S+)$", text, re.M).group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pylog-direct-bench-"))
    store = LocalObjectStore(work / "minio").start()
    store.create_bucket("bench")
    os.environ.update(store.env())
    url = "s3://bench/tiered"
    broker = BrokerProcess(work / "broker", settings={
        "remote.log.storage.system.enable": "true", "remote.log.storage.url": url,
        "remote.log.manager.task.interval.ms": 500, "log.retention.check.interval.ms": 500, "metrics.port": 0}).start()
    runs: list[dict] = []
    try:
        subprocess.run(PYLOG + ["topics", "create", "--bootstrap-server", broker.bootstrap, "--topic", "t",
                                "--partitions", str(args.partitions), "--config", "remote.storage.enable=true",
                                "--config", f"segment.bytes={SEGMENT}", "--config", f"local.retention.bytes={SEGMENT}"],
                       check=True, capture_output=True, timeout=60)
        subprocess.run(PYLOG + ["perf", "produce", "--bootstrap-server", broker.bootstrap, "--topic", "t",
                                "--num-records", str(args.records), "--record-size", "100", "--no-progress"],
                       check=True, capture_output=True, timeout=900)
        total = args.records * 100
        deadline = time.monotonic() + 600
        while _local_bytes(broker, "t", args.partitions) > 0.25 * total and time.monotonic() < deadline:
            time.sleep(1)
        local = _local_bytes(broker, "t", args.partitions)
        print(f"uploaded: {local / 1e6:.0f} MB of about {total * 1.08 / 1e6:.0f} MB left on the disk", file=sys.stderr)

        spark_env()
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[2]").appName("pylog-direct-reads-bench")
                 .config("spark.ui.enabled", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        options = {f"remoteStorage.{k}": v for k, v in store.storage_options().items()}

        def read(direct: bool) -> dict:
            df = (spark.read.format("pylog").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", "t")
                  .option("remoteStorage", url).options(**options).option("directReads", str(direct).lower()).load())
            served, cpu = _remote_fetch_bytes(broker), cpu_seconds(broker.proc.pid)
            load = os.getloadavg()[0]
            t = time.perf_counter()
            row = df.selectExpr("count(*) AS c", "sum(length(value)) AS b").collect()[0]
            seconds = time.perf_counter() - t
            return {"direct": direct, "seconds": seconds, "records": row.c, "value_bytes": row.b,
                    "records_per_s": row.c / seconds, "broker_cpu_s": cpu_seconds(broker.proc.pid) - cpu,
                    "broker_remote_fetch_bytes": _remote_fetch_bytes(broker) - served, "load1_before": load}

        read(True)          # warm-up: the JVM, the Python workers, the executors' store clients
        read(False)
        for rep in range(args.reps):
            for direct in ((True, False) if rep % 2 == 0 else (False, True)):
                r = read(direct)
                r["rep"] = rep
                runs.append(r)
                print(f"  rep {rep + 1}/{args.reps} {'direct ' if direct else 'broker '}: {r['records_per_s']:>12,.0f} "
                      f"rec/s, {r['seconds']:.2f} s, broker CPU {r['broker_cpu_s']:.2f} s, broker remote bytes "
                      f"{r['broker_remote_fetch_bytes'] / 1e6:.0f} MB, load {r['load1_before']:.1f}", file=sys.stderr)
                if r["records"] != args.records:
                    raise SystemExit(f"read {r['records']} records of {args.records}")
        spark.stop()
    finally:
        broker.close()
        store.stop()
    summary = {}
    for direct in (True, False):
        rows = [r for r in runs if r["direct"] == direct]
        summary["direct" if direct else "broker"] = {
            "records_per_s_median": statistics.median(r["records_per_s"] for r in rows),
            "records_per_s_min_max": [min(r["records_per_s"] for r in rows), max(r["records_per_s"] for r in rows)],
            "broker_cpu_s_median": statistics.median(r["broker_cpu_s"] for r in rows)}
    ratios = [d["records_per_s"] / b["records_per_s"] for d, b in
              zip([r for r in runs if r["direct"]], [r for r in runs if not r["direct"]])]
    summary["direct_over_broker"] = {"ratio_of_medians": summary["direct"]["records_per_s_median"] /
                                     summary["broker"]["records_per_s_median"],
                                     "per_rep_min_max": [min(ratios), max(ratios)]}
    doc = {"benchmark": "direct_reads_bench", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join([sys.executable] + sys.argv), "records": args.records, "partitions": args.partitions,
           "nproc": os.cpu_count(), "summary": summary, "runs": runs}
    out = args.out or REPO / "bench" / "results" / f"direct_reads_bench-{dt.datetime.now():%Y-%m-%d-%H%M%S}.json"
    out.write_text(json.dumps(doc, indent=1))
    print(json.dumps(summary, indent=1))
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
