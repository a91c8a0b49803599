"""Benchmark of the Spark data source `pylog` against Spark's own Kafka connector and Parquet (issue 9).

All numbers come from one run on one machine, one local[2] SparkSession, one pylog broker holding
N records of S bytes in P partitions, produced with `compression.type` C (lz4 by default):
- batch read into the noop sink, runs alternating: pylog (native fetcher), pylog (librdkafka path),
  Spark's Kafka connector (`format("kafka")`, spark-sql-kafka-0-10 for the installed Spark, fetched
  by `make bench` from Maven Central), Parquet of the same records; best of R runs each;
  peak RSS of the Python workers while pylog reads;
- streaming: median micro-batch time with maxOffsetsPerTrigger B, pylog then the Kafka connector,
  alternating for --stream-rounds rounds (each a fresh query), the first two batches of each query
  left out (worker start-up); the median of the rounds' medians is reported, with each round's;
- sink: `df.write.format("pylog")` against `df.write.format("kafka")`, same rows, alternating.

Usage: .venv/bin/python bench/spark_read.py [--records 3000000] [--size 100] [--partitions 8]
       [--compression lz4] [--repeat 3] [--batches 20] [--rows-per-batch 10000]
       [--sink-records 1000000] [--stream-rounds 1] [--only-stream | --only-read | --only-sink]
       [--profile] [--append-results]

Starts its own pylog broker on a free port in a temporary directory and always stops it.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
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

from bench._common import create_topic, rss_mb, spark_env, start_pylog  # noqa: E402

PEER_JARS = REPO / ".cache" / "jars" / "spark-kafka"


def peer_jars() -> list[str]:
    """The Kafka connector's jars that Spark does not already ship (by artifact name)."""
    import pyspark

    shipped = {j.name.rsplit("-", 1)[0] for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    jars = sorted(PEER_JARS.glob("*.jar"))
    if not jars:
        raise SystemExit(f"no jars in {PEER_JARS}: run `make bench` (it fetches them with Maven)")
    return [str(j) for j in jars if j.name.rsplit("-", 1)[0] not in shipped]


def load_topic(bootstrap: str, topic: str, records: int, size: int, partitions: int, compression: str) -> float:
    """Create the topic and fill it round-robin; returns seconds taken."""
    from confluent_kafka import Producer

    create_topic(bootstrap, topic, partitions)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "acks": 1,
                  "compression.type": compression, "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 1_048_576})
    value = os.urandom(size)
    t0 = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, key=b"%08d" % i, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(300):
        raise SystemExit("records left undelivered")
    return time.perf_counter() - t0


class WorkerRss:
    """Peak RSS of Spark's Python workers (processes running pyspark.daemon / pyspark.worker), per
    case: set `case` before each run; `peak_mb[case]` is the highest RSS of any worker during it."""

    def __init__(self) -> None:
        self.case = ""
        self.peak_mb: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _workers(self) -> list[int]:
        out = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    cmd = (d / "cmdline").read_bytes()
                except OSError:
                    continue
                if b"pyspark.daemon" in cmd or b"pyspark.worker" in cmd:
                    out.append(int(d.name))
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self._workers():
                try:
                    self.peak_mb[self.case] = max(self.peak_mb.get(self.case, 0.0), rss_mb(pid))
                except (OSError, KeyError):
                    pass
            time.sleep(0.05)

    def __enter__(self) -> "WorkerRss":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def batch_durations(query: Any, batches: int, timeout: float = 900) -> list[float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len([p for p in query.recentProgress if p["numInputRows"] > 0]) >= batches or not query.isActive:
            break
        time.sleep(0.2)
    query.stop()
    if query.exception() is not None:
        raise query.exception()
    return [p["durationMs"]["triggerExecution"] / 1000.0 for p in query.recentProgress if p["numInputRows"] > 0]


def sink_case(spark: Any, bootstrap: str, args: argparse.Namespace, r: dict[str, Any]) -> None:
    """df.write.format("pylog") against df.write.format("kafka"), same rows, alternating, two rounds."""
    from pyspark.sql import functions as F

    src = spark.range(args.sink_records, numPartitions=2).select(
        F.lpad(F.col("id").cast("string"), args.size, "x").alias("value")).cache()
    src.count()
    sink_runs: dict[str, list[float]] = {"pylog": [], "kafka": []}
    for i in range(2):
        for fmt in sink_runs:
            sink_topic = f"sink-{fmt}-{i}"
            create_topic(bootstrap, sink_topic, args.partitions)
            t0 = time.perf_counter()
            src.write.format(fmt).mode("append").option("kafka.bootstrap.servers", bootstrap) \
                .option("topic", sink_topic).save()
            sink_runs[fmt].append(time.perf_counter() - t0)
    for fmt, times in sink_runs.items():
        r[f"sink_{fmt}"] = args.sink_records / min(times)
        print(f"sink {fmt}: {r[f'sink_{fmt}']:,.0f} rec/s (runs {[round(x, 2) for x in times]} s)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--compression", default="lz4")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--rows-per-batch", type=int, default=10_000)
    ap.add_argument("--sink-records", type=int, default=1_000_000)
    ap.add_argument("--stream-rounds", type=int, default=1, help="streaming queries per source, alternating")
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--only-sink", action="store_true", help="run only the sink case (pylog against the connector)")
    only.add_argument("--only-stream", action="store_true", help="run only the streaming case")
    only.add_argument("--only-read", action="store_true", help="run only the batch read case")
    ap.add_argument("--skip-librdkafka", action="store_true", help="leave out pylog's librdkafka path")
    ap.add_argument("--profile", action="store_true", help="print where a pylog read's Python worker time goes")
    ap.add_argument("--append-results", action="store_true", help="append a section to bench/RESULTS.md")
    args = ap.parse_args()
    spark_env()

    from pyspark.sql import SparkSession, functions as F

    work = Path(tempfile.mkdtemp(prefix="pylog-spark-bench-"))
    broker = start_pylog(work / "data")
    bootstrap = broker.bootstrap
    r: dict[str, Any] = {}
    load_start = os.getloadavg()[0]
    try:
        topic = "bench"
        if args.only_sink:
            spark = (SparkSession.builder.master("local[2]").appName("pylog-spark-bench")
                     .config("spark.ui.enabled", "false").config("spark.jars", ",".join(peer_jars())).getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            sink_case(spark, bootstrap, args, r)
            spark.stop()
            print(f"load average {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; nproc "
                  f"{os.cpu_count()}; pylog/connector {r['sink_pylog'] / r['sink_kafka']:.2f}x", flush=True)
            return
        produce_s = load_topic(bootstrap, topic, args.records, args.size, args.partitions, args.compression)
        print(f"loaded {args.records:,} x {args.size} B ({args.compression}) in {produce_s:.1f} s", flush=True)
        builder = (SparkSession.builder.master("local[2]").appName("pylog-spark-bench")
                   .config("spark.ui.enabled", "false").config("spark.jars", ",".join(peer_jars())))
        if args.profile:
            builder = builder.config("spark.python.profile", "true")
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")

        def reader(fmt: str, **extra: str) -> Any:
            rd = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            for k, v in extra.items():
                rd = rd.option(k, v)
            return rd.load()

        parquet_dir = work / "parquet"
        cases: dict[str, Callable[[], Any]] = {}
        if not args.only_stream:
            reader("pylog").write.parquet(str(parquet_dir))
            cases = {
                "pylog": lambda: reader("pylog"),
                "kafka": lambda: reader("kafka"),
                "parquet": lambda: spark.read.parquet(str(parquet_dir)),
            }
            if not args.skip_librdkafka:
                cases["pylog-librdkafka"] = lambda: reader("pylog", fetcher="librdkafka")
        # warm-up: JVM classes, Python workers, page cache. pylog goes first on fresh Python workers,
        # so its peak RSS is its own (workers are reused, and the librdkafka path leaves them large)
        with WorkerRss() as fresh:
            for name, df in cases.items():
                fresh.case = name
                assert df().count() == args.records, f"{name} did not read {args.records} records"
        runs: dict[str, list[float]] = {name: [] for name in cases}
        rss = WorkerRss()
        with rss:
            for _ in range(args.repeat):
                for name, df in cases.items():
                    rss.case = name
                    t0 = time.perf_counter()
                    df().write.format("noop").mode("overwrite").save()
                    runs[name].append(time.perf_counter() - t0)
        for name, times in runs.items():
            r[f"read_{name}"] = args.records / min(times)
            print(f"batch read {name}: {r[f'read_{name}']:,.0f} rec/s (runs {[round(x, 2) for x in times]} s)", flush=True)
        if cases:
            r["rss_mb"] = fresh.peak_mb.get("pylog", 0.0)
            print(f"peak Python worker RSS of pylog's reads on fresh workers: {r['rss_mb']:.0f} MB; during the "
                  "alternating runs (workers shared by every case): " + ", ".join(
                      f"{name} {mb:.0f} MB" for name, mb in rss.peak_mb.items()), flush=True)
        if args.profile:
            reader("pylog").write.format("noop").mode("overwrite").save()
            spark.sparkContext.show_profiles()

        def stream(fmt: str, name: str) -> list[float]:
            q = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                 .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(args.rows_per_batch))
                 .load().writeStream.format("noop").option("checkpointLocation", str(work / f"cp-{name}"))
                 .trigger(processingTime="0 seconds").start())
            return batch_durations(q, args.batches)

        rounds: dict[str, list[float]] = {"pylog": [], "kafka": []}
        for i in range(args.stream_rounds if not args.only_read else 0):
            for fmt in rounds:
                durations = stream(fmt, f"{fmt}-{i}")
                rounds[fmt].append(statistics.median(durations[2:]) * 1000)
                print(f"streaming {fmt}, round {i + 1}: median {rounds[fmt][-1]:.0f} ms/batch over "
                      f"{len(durations) - 2} batches (load {os.getloadavg()[0]:.1f})", flush=True)
        for fmt, medians in rounds.items():
            if medians:
                r[f"stream_{fmt}_ms"] = statistics.median(medians)
                r[f"stream_{fmt}_rounds"] = medians

        if not (args.only_stream or args.only_read):
            sink_case(spark, bootstrap, args, r)
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)

    def ratio(a: str, b: str) -> float:
        return float(r[a]) / float(r[b])

    rows = []
    if "read_pylog" in r:
        rows.append(
            f"| batch read, {args.records:,} x {args.size} B, {args.partitions} partitions, {args.compression} | "
            f"{r['read_pylog']:,.0f} rec/s | Kafka connector {r['read_kafka']:,.0f}; Parquet {r['read_parquet']:,.0f} | "
            f"{ratio('read_pylog', 'read_kafka'):.2f}x connector (target 1.5x), "
            f"{ratio('read_pylog', 'read_parquet'):.2f}x Parquet (target 0.5x) |")
    if "read_pylog-librdkafka" in r:
        rows.append(f"| batch read, pylog's librdkafka path (TLS/SASL) | {r['read_pylog-librdkafka']:,.0f} rec/s | | "
                    f"{ratio('read_pylog-librdkafka', 'read_kafka'):.2f}x connector |")
    if "stream_pylog_ms" in r:
        each = ""
        if args.stream_rounds > 1:
            each = " (rounds: " + ", ".join(f"{a:.0f}/{b:.0f}" for a, b in zip(r["stream_pylog_rounds"],
                                                                               r["stream_kafka_rounds"])) + " ms)"
        rows.append(f"| streaming, maxOffsetsPerTrigger {args.rows_per_batch:,}, median micro-batch{each} | "
                    f"{r['stream_pylog_ms']:.0f} ms | Kafka connector {r['stream_kafka_ms']:.0f} ms | "
                    f"{ratio('stream_pylog_ms', 'stream_kafka_ms'):.2f}x (target <= 1.2x) |")
    if "sink_pylog" in r:
        rows.append(f"| sink, {args.sink_records:,} x {args.size} B, 2 tasks | {r['sink_pylog']:,.0f} rec/s | "
                    f"Kafka connector {r['sink_kafka']:,.0f} rec/s | {ratio('sink_pylog', 'sink_kafka'):.2f}x "
                    "(target 1.0x) |")
    if "rss_mb" in r:
        rows.append(f"| peak Python worker RSS while pylog reads (fresh workers) | {r['rss_mb']:.0f} MB | | "
                    "target < 300 MB |")
    print("\n".join(rows))
    if args.append_results:
        cmd = " ".join(shlex.quote(a) for a in [".venv/bin/python", "bench/spark_read.py", *sys.argv[1:]])
        section = (f"\n## Spark read path against Spark's Kafka connector and Parquet (bench/spark_read.py), "
                   f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC\n\n"
                   f"Command: `{cmd}`. Machine: nproc {os.cpu_count()}, load average {load_start:.1f} at the start, "
                   f"{os.getloadavg()[0]:.1f} at the end.\n\n"
                   "| case | pylog | peers in the same run | ratio |\n| --- | --- | --- | --- |\n" + "\n".join(rows) + "\n")
        with open(REPO / "bench" / "RESULTS.md", "a") as f:
            f.write(section)


if __name__ == "__main__":
    main()
