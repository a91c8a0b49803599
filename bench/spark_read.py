"""Benchmark of the Spark data source `pylog` (issue 4), all numbers from one run on one machine:

- batch read: N records of S bytes over P partitions with local[2] into the noop sink, in records/s,
  against spark.read.parquet over the same records in the same run (targets: >= 1 M records/s and
  >= 0.5x parquet);
- streaming: median per-micro-batch time of `readStream.format("pylog")` with maxOffsetsPerTrigger
  against Spark's built-in rate-micro-batch source with the same rows per batch, both into noop
  (target: <= 1.5x the rate source);
- sink: records/s written by `df.write.format("pylog")`.

Usage: .venv/bin/python bench/spark_read.py [--records 5000000] [--size 100] [--partitions 8]
       [--batches 20] [--sink-records 1000000] [--append-results]

Starts its own pylog broker on a free port in a temporary directory and always stops it.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("SPARK_CONF_DIR", str(REPO / "conf"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data_dir: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = open(data_dir.parent / "broker.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "pylog", "--log-level", "WARNING", "broker", "--data-dir",
                             str(data_dir), "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
                            cwd=str(REPO), start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"broker exited with {proc.returncode}")
            time.sleep(0.05)
    raise SystemExit("broker did not start")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def load_topic(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> float:
    """Create the topic and fill it round-robin; returns seconds taken."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "acks": 1,
                  "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 1_048_576})
    value = os.urandom(size)
    t0 = time.perf_counter()
    produce = p.produce
    for i in range(records):
        while True:
            try:
                produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(300):
        raise SystemExit("records left undelivered")
    return time.perf_counter() - t0


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def batch_durations(query: Any, batches: int, timeout: float = 600) -> list[float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        prog = [p for p in query.recentProgress if p["numInputRows"] > 0]
        if len(prog) >= batches:
            break
        if not query.isActive:
            break
        time.sleep(0.2)
    query.stop()
    prog = [p for p in query.recentProgress if p["numInputRows"] > 0]
    if query.exception() is not None:
        raise query.exception()
    return [p["durationMs"]["triggerExecution"] / 1000.0 for p in prog]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--rows-per-batch", type=int, default=10_000)
    ap.add_argument("--sink-records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--append-results", action="store_true", help="append a section to bench/RESULTS.md")
    args = ap.parse_args()

    from pyspark.sql import SparkSession, functions as F

    work = Path(tempfile.mkdtemp(prefix="pylog-spark-bench-"))
    broker, bootstrap = start_broker(work / "data")
    results: dict[str, Any] = {}
    try:
        topic = "bench"
        produce_s = load_topic(bootstrap, topic, args.records, args.size, args.partitions)
        print(f"loaded {args.records} x {args.size} B in {produce_s:.1f} s", flush=True)
        spark = (SparkSession.builder.master("local[2]").appName("pylog-spark-bench")
                 .config("spark.ui.enabled", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")

        def pylog_df():
            return (spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topic).load())

        # warm up the Python workers, then the measured runs
        spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic) \
            .option("endingOffsets", "{\"%s\":{%s}}" % (topic, ",".join(f'"{p}":10' for p in range(args.partitions)))) \
            .load().write.format("noop").mode("overwrite").save()
        read_s = timed(lambda: pylog_df().write.format("noop").mode("overwrite").save(), args.repeat)
        assert pylog_df().count() == args.records
        parquet_dir = work / "parquet"
        pylog_df().write.parquet(str(parquet_dir))
        parquet_s = timed(lambda: spark.read.parquet(str(parquet_dir)).write.format("noop").mode("overwrite").save(),
                          args.repeat)
        results["read_rps"] = args.records / min(read_s)
        results["parquet_rps"] = args.records / min(parquet_s)
        print(f"batch read: pylog {results['read_rps']:,.0f} rec/s (runs {[round(x, 2) for x in read_s]} s), "
              f"parquet {results['parquet_rps']:,.0f} rec/s (runs {[round(x, 2) for x in parquet_s]} s)", flush=True)

        # streaming: per-micro-batch time, same rows per batch, noop sink
        q = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(args.rows_per_batch)).load()
             .writeStream.format("noop").option("checkpointLocation", str(work / "cp-pylog"))
             .trigger(processingTime="0 seconds").start())
        pylog_batches = batch_durations(q, args.batches)
        q = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", str(args.rows_per_batch)).load()
             .writeStream.format("noop").option("checkpointLocation", str(work / "cp-rate"))
             .trigger(processingTime="0 seconds").start())
        rate_batches = batch_durations(q, args.batches)
        # the first batches pay for Python worker start-up: compare steady state
        results["stream_pylog_ms"] = statistics.median(pylog_batches[2:]) * 1000
        results["stream_rate_ms"] = statistics.median(rate_batches[2:]) * 1000
        print(f"streaming: pylog median {results['stream_pylog_ms']:.0f} ms/batch, rate-micro-batch "
              f"{results['stream_rate_ms']:.0f} ms/batch ({args.rows_per_batch} rows/batch, "
              f"{len(pylog_batches)} and {len(rate_batches)} batches)", flush=True)

        # sink
        sink_topic = "bench-sink"
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(sink_topic, args.partitions, 1)])[sink_topic].result(30)
        src = spark.range(args.sink_records, numPartitions=2).select(
            F.lpad(F.col("id").cast("string"), args.size, "x").alias("value")).cache()
        src.count()
        sink_s = timed(lambda: src.write.format("pylog").mode("append").option("kafka.bootstrap.servers", bootstrap)
                       .option("topic", sink_topic).save(), 1)
        results["sink_rps"] = args.sink_records / sink_s[0]
        print(f"sink: {results['sink_rps']:,.0f} rec/s ({args.sink_records} x {args.size} B in {sink_s[0]:.1f} s)",
              flush=True)
        spark.stop()
    finally:
        stop(broker)
        shutil.rmtree(work, ignore_errors=True)

    ratio = results["read_rps"] / results["parquet_rps"]
    stream_ratio = results["stream_pylog_ms"] / results["stream_rate_ms"]
    summary = [
        f"| batch read, {args.records:,} x {args.size} B, {args.partitions} partitions, local[2], noop sink | "
        f"{results['read_rps']:,.0f} rec/s | parquet {results['parquet_rps']:,.0f} rec/s; ratio {ratio:.2f} | "
        f">= 1,000,000 rec/s and >= 0.5x parquet: {'met' if results['read_rps'] >= 1e6 and ratio >= 0.5 else 'NOT met'} |",
        f"| streaming, {args.rows_per_batch:,} rows/batch, median of {args.batches} batches | "
        f"{results['stream_pylog_ms']:.0f} ms/batch | rate-micro-batch {results['stream_rate_ms']:.0f} ms/batch; "
        f"ratio {stream_ratio:.2f} | <= 1.5x: {'met' if stream_ratio <= 1.5 else 'NOT met'} |",
        f"| sink, {args.sink_records:,} x {args.size} B, 2 tasks | {results['sink_rps']:,.0f} rec/s | | |",
    ]
    print("\n".join(summary))
    if args.append_results:
        cmd = " ".join(shlex.quote(a) for a in [".venv/bin/python", "bench/spark_read.py", *sys.argv[1:]])
        load = os.getloadavg()
        section = (f"\n## Spark data source `pylog` (bench/spark_read.py), {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}\n\n"
                   f"Command: `{cmd}` (nproc {os.cpu_count()}, load average at the end {load[0]:.1f}, "
                   "other benchmarks and test suites running on the same machine)\n\n"
                   "| case | pylog | baseline in the same run | target |\n| --- | --- | --- | --- |\n"
                   + "\n".join(summary) + "\n")
        with open(REPO / "bench" / "RESULTS.md", "a") as f:
            f.write(section)


if __name__ == "__main__":
    main()
