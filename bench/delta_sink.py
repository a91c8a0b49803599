"""Benchmark: stream_to_delta end to end vs Spark's plain Parquet sink on the same batches.

Produces N JSON events into a pylog broker, then runs, in one local[2] SparkSession, the same
streaming query (readStream pylog → parse JSON → table columns; availableNow with
maxOffsetsPerTrigger) into (a) the exactly-once `pylog-delta` sink and (b) Spark's built-in
`parquet` file sink, alternating, and reports records/s and per-batch latency of each and the ratio.

    .venv/bin/python bench/delta_sink.py [--records 500000] [--per-trigger 100000] [--repeat 2]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from pylog.launch.process import BrokerProcess  # noqa: E402
from jobs.rows import table_rows  # noqa: E402

SCHEMA = "event_id string, user_id string, type string, amount double, ts long"


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "compression.type": "lz4",
                  "queue.buffering.max.messages": 1_000_000})
    for i in range(n):
        v = json.dumps({"event_id": str(i), "user_id": f"user-{i % 997}", "type": "click", "amount": 1.5, "ts": i})
        while True:
            try:
                p.produce(topic, value=v.encode(), key=str(i % 997).encode())
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def run_query(spark, bootstrap: str, topic: str, per_trigger: int, sink: str, workdir: Path) -> dict:
    df = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", per_trigger).load())
    rows = table_rows(df, SCHEMA)
    out = workdir / f"{sink}-{time.time_ns()}"
    w = rows.writeStream.option("checkpointLocation", str(out / "_ckpt")).trigger(availableNow=True)
    if sink == "delta":
        w = w.format("pylog-delta").option("path", str(out / "table")).option("appId", "bench")
    else:
        w = w.format("parquet").option("path", str(out / "table"))
    start = time.monotonic()
    q = w.start()
    q.awaitTermination()
    elapsed = time.monotonic() - start
    progress = [p for p in q.recentProgress if p.numInputRows > 0]
    rows_total = sum(p.numInputRows for p in progress)
    batch_ms = [p.batchDuration for p in progress]
    return {"sink": sink, "seconds": elapsed, "rows": rows_total, "records_per_s": rows_total / elapsed,
            "batches": len(progress), "batch_ms_median": statistics.median(batch_ms) if batch_ms else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--per-trigger", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    workdir = Path(tempfile.mkdtemp(prefix="pylog-bench-delta-"))
    broker = BrokerProcess(workdir / "broker").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # keep a reference while waiting
        admin.create_topics([NewTopic("events", args.partitions, 1)])["events"].result(timeout=15)
        t = time.monotonic()
        produce(broker.bootstrap, "events", args.records)
        print(f"produced {args.records} events in {time.monotonic() - t:.1f}s", file=sys.stderr)
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "4")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        run_query(spark, broker.bootstrap, "events", args.per_trigger, "parquet", workdir)  # warm-up
        results: dict[str, list[dict]] = {"delta": [], "parquet": []}
        for _ in range(args.repeat):
            for sink in ("delta", "parquet"):
                r = run_query(spark, broker.bootstrap, "events", args.per_trigger, sink, workdir)
                results[sink].append(r)
                print(json.dumps(r), file=sys.stderr)
        med = {s: statistics.median(r["records_per_s"] for r in rs) for s, rs in results.items()}
        lat = {s: statistics.median(r["batch_ms_median"] for r in rs) for s, rs in results.items()}
        print(f"| sink | records/s (median of {args.repeat}) | median batch ms |")
        print("|---|---:|---:|")
        for s in ("delta", "parquet"):
            print(f"| {s} | {med[s]:,.0f} | {lat[s]:,.0f} |")
        print(f"ratio pylog-delta / parquet: {med['delta'] / med['parquet']:.2f}")
        spark.stop()
    finally:
        broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
