"""How close is `format("pylog")` to what any Python data source can do in PySpark 4.2? (issue 9)

Issue 9's last two targets compare a Python source with Spark's own JVM readers: a batch read at
0.5x Parquet and streaming micro-batches at most 1.2x the Kafka connector's. This benchmark puts
beside pylog, in the same local[2] session and alternating with it and the peers, two Python sources
that do no I/O at all, so the part of each figure that belongs to PySpark's Python data source
machinery (a Python worker per task, Arrow IPC to the JVM, the JVM turning Arrow into rows) is
measured, not assumed:

- batch: pylog, Spark's Kafka connector, Parquet of the same records, and `arrow-ceiling`
  (bench/read_profile.py: ready-made Arrow batches of pylog's schema, as many rows, as many tasks);
  best of R runs each into the noop sink;
- streaming, maxOffsetsPerTrigger B: pylog, the Kafka connector and `arrow-floor` (each micro-batch
  one task yielding one ready-made B-row Arrow batch of pylog's schema); median micro-batch time
  per query, first two batches left out; the median of the rounds is reported, with each round.

Usage: .venv/bin/python bench/python_source_floor.py [--records 3000000] [--repeat 5] [--rounds 3]
       [--rows-per-batch 10000] [--batches 20] [--append-results]
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
import time
from pathlib import Path
from typing import Any, Callable, Iterator

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition  # noqa: E402

from bench._common import spark_env, start_pylog  # noqa: E402
from bench.read_profile import CeilingSource, ready_made_batch  # noqa: E402
from bench.spark_read import batch_durations, load_topic, peer_jars  # noqa: E402

PARTITIONS = 8


class _FloorStreamReader(DataSourceStreamReader):
    def __init__(self, rows: int) -> None:
        self.rows = rows

    def initialOffset(self) -> dict[str, int]:
        return {"next": 0}

    def latestOffset(self) -> dict[str, int]:     # unbounded: every trigger finds `rows` new rows
        return {"next": int(time.time() * 1000)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [InputPartition(start["next"])]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        yield ready_made_batch(self.rows)

    def commit(self, end: dict[str, int]) -> None:
        pass


class FloorSource(DataSource):
    """A streaming source with no I/O: one ready-made Arrow batch per micro-batch, pylog's schema."""

    @classmethod
    def name(cls) -> str:
        return "arrow-floor"

    def schema(self) -> Any:
        from sparklog.schema import spark_schema

        return spark_schema(False)

    def streamReader(self, schema: Any) -> _FloorStreamReader:
        return _FloorStreamReader(int(self.options.get("maxoffsetspertrigger", "10000")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows-per-batch", type=int, default=10_000)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--append-results", action="store_true")
    args = ap.parse_args()
    spark_env()
    from pyspark.sql import SparkSession

    work = Path(tempfile.mkdtemp(prefix="pylog-floor-bench-"))
    broker = start_pylog(work / "data")
    load_start = os.getloadavg()[0]
    read: dict[str, list[float]] = {}
    stream: dict[str, list[float]] = {}
    try:
        load_topic(broker.bootstrap, "bench", args.records, 100, PARTITIONS, "lz4")
        spark = (SparkSession.builder.master("local[2]").appName("pylog-floor-bench").config("spark.ui.enabled", "false")
                 .config("spark.jars", ",".join(peer_jars())).getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(CeilingSource)
        spark.dataSource.register(FloorSource)

        def kafka_like(fmt: str, stream: bool = False) -> Any:
            reader = spark.readStream if stream else spark.read
            return reader.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", "bench")

        parquet = work / "parquet"
        kafka_like("pylog").load().write.parquet(str(parquet))
        tasks = kafka_like("pylog").load().rdd.getNumPartitions()       # the same task count for the ceiling
        cases: dict[str, Callable[[], Any]] = {
            "pylog": lambda: kafka_like("pylog").load(),
            "kafka": lambda: kafka_like("kafka").load(),
            "parquet": lambda: spark.read.parquet(str(parquet)),
            "arrow-ceiling": lambda: spark.read.format("arrow-ceiling").option("rows", str(args.records))
            .option("tasks", str(tasks)).load(),
        }
        for name, df in cases.items():                       # warm-up: JVM classes, workers, page cache
            df().write.format("noop").mode("overwrite").save()
        for _ in range(args.repeat):
            for name, df in cases.items():
                t0 = time.perf_counter()
                df().write.format("noop").mode("overwrite").save()
                read.setdefault(name, []).append(time.perf_counter() - t0)
        for name, times in read.items():
            print(f"batch {name}: {args.records / min(times):,.0f} rec/s (runs {[round(t, 2) for t in times]} s)",
                  flush=True)

        for i in range(args.rounds):
            for fmt in ("pylog", "kafka", "arrow-floor"):
                q = (kafka_like(fmt, stream=True).option("startingOffsets", "earliest")
                     .option("maxOffsetsPerTrigger", str(args.rows_per_batch)).load()
                     .writeStream.format("noop").option("checkpointLocation", str(work / f"cp-{fmt}-{i}"))
                     .trigger(processingTime="0 seconds").start())
                median_ms = statistics.median(batch_durations(q, args.batches)[2:]) * 1000
                stream.setdefault(fmt, []).append(median_ms)
                print(f"streaming {fmt}, round {i + 1}: median {median_ms:.0f} ms (load {os.getloadavg()[0]:.1f})",
                      flush=True)
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)

    rate = {name: args.records / min(times) for name, times in read.items()}
    ms = {name: statistics.median(m) for name, m in stream.items()}
    rounds = ", ".join("/".join(f"{stream[f][i]:.0f}" for f in ("pylog", "kafka", "arrow-floor"))
                       for i in range(args.rounds))
    rows = [
        f"| batch read, {args.records:,} x 100 B, {PARTITIONS} partitions, lz4, {tasks} tasks (rec/s) | "
        f"{rate['pylog']:,.0f} | {rate['arrow-ceiling']:,.0f} | Kafka connector {rate['kafka']:,.0f}; "
        f"Parquet {rate['parquet']:,.0f} | pylog {rate['pylog'] / rate['parquet']:.2f}x Parquet, "
        f"ceiling {rate['arrow-ceiling'] / rate['parquet']:.2f}x Parquet (target 0.5x); "
        f"pylog {rate['pylog'] / rate['kafka']:.2f}x connector |",
        f"| streaming, maxOffsetsPerTrigger {args.rows_per_batch:,}, median micro-batch (rounds pylog/kafka/floor: "
        f"{rounds} ms) | {ms['pylog']:.0f} ms | {ms['arrow-floor']:.0f} ms | Kafka connector {ms['kafka']:.0f} ms | "
        f"pylog {ms['pylog'] / ms['kafka']:.2f}x, floor {ms['arrow-floor'] / ms['kafka']:.2f}x connector "
        "(target <= 1.2x) |",
    ]
    print("\n".join(rows))
    if args.append_results:
        cmd = " ".join(shlex.quote(a) for a in [".venv/bin/python", "bench/python_source_floor.py", *sys.argv[1:]])
        with open(REPO / "bench" / "RESULTS.md", "a") as f:
            f.write(f"\n## pylog against the floor of any Python data source (bench/python_source_floor.py), "
                    f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC\n\nCommand: `{cmd}`. Machine: nproc "
                    f"{os.cpu_count()}, load average {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the "
                    "end.\n\n| case | pylog | Python source doing no I/O | peers in the same run | ratios |\n"
                    "| --- | --- | --- | --- | --- |\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
