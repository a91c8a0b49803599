"""Benchmark (issue 13): `pylog job stream_to_delta` against the path users have today, Spark's own Kafka
connector feeding delta-spark's streaming Delta sink, and the job's delta-spark engine; same broker,
same records, same SparkSession, same run.

One pylog broker holds one topic of N JSON events (bench/delta_sink.py's records and producer: lz4,
keyed, default 1,000,000 records in 8 partitions). One local[2] SparkSession carries both Spark's
Kafka connector (spark-sql-kafka, .cache/jars/spark-kafka, bench/spark_read.peer_jars) and delta-spark
(jobs.spark_session.with_delta_spark). Three pipelines, each reading the whole topic with
`trigger(availableNow=True)` and `maxOffsetsPerTrigger` B (default 100,000), parsing the values with
the jobs' own row conversion (jobs.rows.table_rows, value schema `SCHEMA`: the same columns in every
table) and writing a fresh Delta table:
  pylog-delta        `format("pylog")` → the `pylog-delta` sink (delta-rs): jobs.stream_to_delta.run, i.e.
                     exactly what `pylog job stream_to_delta` runs by default (sink.engine=delta-rs);
  pylog-delta-spark  the same job with sink.engine=delta-spark: foreachBatch, each micro-batch in one
                     delta-spark commit (jobs.sink_engine.DeltaSparkStreamWriter);
  kafka-delta        `format("kafka")` (same broker, same options) → `writeStream.format("delta")` with a
                     checkpoint: delta-spark's streaming sink, the path users have today.
Before the measurements each pipeline runs once on a small warm-up topic (JVM classes, Python workers,
delta-rs and delta-spark code paths; not reported). Then `--repeat` rounds, each running the three
pipelines one after the other, the order rotated every round.

What is timed, the same way for all three: wall-clock seconds from the call that starts the pipeline
(the session already running and warm) to the end of its last micro-batch. For the two pylog pipelines
that call is `jobs.stream_to_delta.run(cfg)`, which also plans the job as `pylog job` does (getOrCreate of
the running session, the table's generation claim: a delta-rs commit that creates the table); for the
connector it is `readStream...writeStream...start()` plus `awaitTermination()` (its first batch creates
the table). `to_first_batch_s` says how much of each run is start-up. Reported per pipeline:
records/s = N / seconds (median over the rounds), the median micro-batch time (Spark's batchDuration,
median per run, then median over runs), and the rows in each table, read back with delta-spark after
the timed part: the row count and the number of distinct (partition, offset) must both equal N, or the
benchmark stops (a run that loses or duplicates rows is void). Ratios: pylog-delta / kafka-delta
(target >= 1.0x) and pylog-delta-spark / kafka-delta.

Usage:
    .venv/bin/python bench/stream_to_delta_peers.py [--records 1000000] [--partitions 8]
        [--per-trigger 100000] [--repeat 3] [--warmup-records 20000] [--workdir DIR] [--out FILE.json]
Needs the jars: `make .stamps/jars-spark-kafka .stamps/jars-delta-spark`. Starts its own broker on a
free port under a temporary directory and always stops it and removes the directory.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import create_topic, spark_env, start_pylog, write_json  # noqa: E402
from bench.delta_sink import SCHEMA, produce  # noqa: E402
from bench.spark_read import peer_jars  # noqa: E402

PIPELINES = ("pylog-delta", "pylog-delta-spark", "kafka-delta")
BASELINE = "kafka-delta"
TOPIC = "events"
WARMUP_TOPIC = "warmup"


class ProgressLog:
    """A StreamingQueryListener that keeps every progress event of the queries started since `reset()`,
    so the pipelines that run inside the job (no query handle) are measured as the connector's is.
    Events arrive asynchronously: `wait_terminated()` returns once every started query's termination,
    and so every progress before it, has been delivered."""

    def __init__(self) -> None:
        from pyspark.sql.streaming import StreamingQueryListener

        owner = self

        class _Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                with owner._lock:
                    owner._started.add(str(event.id))

            def onQueryProgress(self, event: Any) -> None:
                p = event.progress
                with owner._lock:
                    owner.progress.append({"batch_id": p.batchId, "rows": p.numInputRows,
                                           "batch_ms": p.batchDuration, "timestamp": p.timestamp})

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                with owner._lock:
                    owner._terminated.add(str(event.id))
                    owner._done.notify_all()

        self.listener = _Listener()
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._started: set[str] = set()
        self._terminated: set[str] = set()
        self.progress: list[dict[str, Any]] = []

    def reset(self) -> None:
        with self._lock:
            self._started.clear()
            self._terminated.clear()
            self.progress = []

    def wait_terminated(self, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        with self._done:
            if not self._done.wait_for(lambda: self._started and self._started <= self._terminated, timeout_s):
                raise TimeoutError("the streaming query's termination event never arrived")
            return sorted(self.progress, key=lambda p: p["batch_id"])


def build_spark(jars: list[str]) -> Any:
    """One local[2] session with the Kafka connector's jars and delta-spark, built as the jobs build theirs
    (jobs.spark_session.build_session), so the job's own getOrCreate later returns this session."""
    from jobs.config import JobConfig
    from jobs.spark_session import build_session

    cfg = JobConfig.load("stream_to_delta", None, [f"spark.jars={','.join(jars)}", "spark.master=local[2]",
                                                   "spark.log.level=ERROR"])
    return build_session(cfg, "pylog bench stream_to_delta_peers", delta_spark=True)


def job_config(bootstrap: str, topic: str, per_trigger: int, table: Path, checkpoint: Path, engine: str) -> Any:
    """`pylog job stream_to_delta`'s settings for one run: conf/jobs/stream_to_delta.properties plus these."""
    from jobs.config import JobConfig

    return JobConfig.load("stream_to_delta", None, [
        f"source.bootstrap.servers={bootstrap}", f"source.topics={topic}", "source.starting.offsets=earliest",
        f"source.max.offsets.per.trigger={per_trigger}", "source.fail.on.data.loss=true",
        f"sink.table.path={table}", f"sink.checkpoint.location={checkpoint}", f"sink.app.id=bench-{engine}",
        f"sink.engine={engine}", "sink.mode=append", "trigger=available-now", f"value.schema={SCHEMA}",
        "group.mirror=", "spark.master=local[2]", "spark.log.level=ERROR"])


def run_job(bootstrap: str, topic: str, per_trigger: int, table: Path, checkpoint: Path, engine: str) -> None:
    from jobs import stream_to_delta
    from jobs.signals import STOPPER

    rc = stream_to_delta.run(job_config(bootstrap, topic, per_trigger, table, checkpoint, engine))
    if rc != 0:
        raise RuntimeError(f"stream_to_delta (sink.engine={engine}) returned {rc}")
    if STOPPER.requested.is_set():   # the job stopped early on a signal: the figures would be wrong
        raise KeyboardInterrupt


def run_connector(spark: Any, bootstrap: str, topic: str, per_trigger: int, table: Path, checkpoint: Path) -> None:
    """Spark's Kafka connector → delta-spark's streaming sink, with the job's source options and rows."""
    from jobs.rows import table_rows

    df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(per_trigger))
          .option("failOnDataLoss", "true").load())
    q = (table_rows(df, SCHEMA).writeStream.format("delta").option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start(str(table)))
    q.awaitTermination()
    if q.exception() is not None:
        raise RuntimeError(f"kafka-delta query failed: {q.exception()}")


def table_rows_check(spark: Any, table: Path) -> tuple[int, int]:
    """(rows, distinct (partition, offset)) of a table, read with delta-spark."""
    from pyspark.sql import functions as F

    row = (spark.read.format("delta").load(str(table))
           .agg(F.count(F.lit(1)).alias("n"), F.countDistinct("partition", "offset").alias("d")).collect()[0])
    return int(row["n"]), int(row["d"])


def run_pipeline(spark: Any, progress: ProgressLog, name: str, bootstrap: str, topic: str, records: int,
                 per_trigger: int, workdir: Path) -> dict[str, Any]:
    out = workdir / f"{name}-{time.time_ns()}"
    table, checkpoint = out / "table", out / "checkpoint"
    starts: dict[str, Callable[[], None]] = {
        "pylog-delta": lambda: run_job(bootstrap, topic, per_trigger, table, checkpoint, "delta-rs"),
        "pylog-delta-spark": lambda: run_job(bootstrap, topic, per_trigger, table, checkpoint, "delta-spark"),
        "kafka-delta": lambda: run_connector(spark, bootstrap, topic, per_trigger, table, checkpoint),
    }
    progress.reset()
    begin_wall = time.time()
    t0 = time.perf_counter()
    starts[name]()
    seconds = time.perf_counter() - t0
    batches = [p for p in progress.wait_terminated() if p["rows"] > 0]
    rows, distinct = table_rows_check(spark, table)
    if rows != records or distinct != records:
        raise SystemExit(f"{name}: the table holds {rows} rows ({distinct} distinct partition/offset), not the "
                         f"{records} records of topic {topic}: this run is void")
    if sum(p["rows"] for p in batches) != records:
        raise SystemExit(f"{name}: Spark's progress counts {sum(p['rows'] for p in batches)} input rows, not {records}")
    first = dt.datetime.fromisoformat(batches[0]["timestamp"].replace("Z", "+00:00")).timestamp() if batches else None
    shutil.rmtree(out, ignore_errors=True)
    return {"pipeline": name, "seconds": round(seconds, 3), "records_per_s": round(records / seconds, 1),
            "rows": rows, "batches": len(batches),
            "batch_ms_median": statistics.median(p["batch_ms"] for p in batches) if batches else None,
            "to_first_batch_s": round(first - begin_wall, 3) if first else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--per-trigger", type=int, default=100_000, help="maxOffsetsPerTrigger")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup-records", type=int, default=20_000, help="records of the warm-up topic")
    ap.add_argument("--workdir", type=Path, default=None, help="parent of the broker's data and the tables "
                                                               "(default: the system temp dir)")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON result to this file")
    ap.add_argument("--verbose", action="store_true", help="the jobs' INFO log (one line per batch)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    spark_env()
    jars = peer_jars()
    work = Path(tempfile.mkdtemp(prefix="pylog-bench-peers-", dir=args.workdir))
    load_start = os.getloadavg()[0]
    broker = start_pylog(work / "data")
    try:
        warmup = min(args.records, args.warmup_records)
        for topic, n in ((TOPIC, args.records), (WARMUP_TOPIC, warmup)):
            create_topic(broker.bootstrap, topic, args.partitions)
            t = time.perf_counter()
            produce(broker.bootstrap, topic, n)
            print(f"produced {n:,} events into {topic} ({args.partitions} partitions, lz4) in "
                  f"{time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
        spark = build_spark(jars)
        progress = ProgressLog()
        spark.streams.addListener(progress.listener)
        for name in PIPELINES:
            r = run_pipeline(spark, progress, name, broker.bootstrap, WARMUP_TOPIC, warmup, args.per_trigger, work)
            print(f"warm-up {name}: {r['seconds']:.1f} s", file=sys.stderr, flush=True)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in PIPELINES}
        for i in range(args.repeat):
            order = PIPELINES[i % 3:] + PIPELINES[:i % 3]
            for name in order:
                r = run_pipeline(spark, progress, name, broker.bootstrap, TOPIC, args.records, args.per_trigger, work)
                runs[name].append(r)
                print(json.dumps({"round": i + 1, **r}), file=sys.stderr, flush=True)
        spark.streams.removeListener(progress.listener)
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)

    summary = {name: {"records_per_s": statistics.median(r["records_per_s"] for r in rs),
                      "batch_ms_median": statistics.median(r["batch_ms_median"] for r in rs),
                      "to_first_batch_s": statistics.median(r["to_first_batch_s"] for r in rs),
                      "rows": rs[0]["rows"], "runs": rs} for name, rs in runs.items()}
    base = summary[BASELINE]["records_per_s"]
    ratios = {"pylog-delta/kafka-delta": summary["pylog-delta"]["records_per_s"] / base,
              "pylog-delta-spark/kafka-delta": summary["pylog-delta-spark"]["records_per_s"] / base}
    result = {"bench": "stream_to_delta_peers", "utc": f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M}",
              "records": args.records, "partitions": args.partitions, "per_trigger": args.per_trigger,
              "repeat": args.repeat, "nproc": os.cpu_count(), "load_start": round(load_start, 2),
              "load_end": round(os.getloadavg()[0], 2), "pipelines": summary,
              "ratios": {k: round(v, 3) for k, v in ratios.items()}, "target": "pylog-delta/kafka-delta >= 1.0"}
    print(json.dumps(result))
    print(f"\n| pipeline | records/s (median of {args.repeat}) | median batch ms | to 1st batch s | rows |")
    print("|---|---:|---:|---:|---:|")
    for name, s in summary.items():
        print(f"| {name} | {s['records_per_s']:,.0f} | {s['batch_ms_median']:,.0f} | {s['to_first_batch_s']:.1f} | "
              f"{s['rows']:,} |")
    print(f"\npylog-delta / kafka-delta: {ratios['pylog-delta/kafka-delta']:.2f}x (target >= 1.0x); "
          f"pylog-delta-spark / kafka-delta: {ratios['pylog-delta-spark/kafka-delta']:.2f}x; "
          f"load average {load_start:.1f} -> {os.getloadavg()[0]:.1f}, nproc {os.cpu_count()}")
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
