"""Would `SimpleDataSourceStreamReader` give shorter micro-batches than pylog's `DataSourceStreamReader`?

Issue 9 asks to measure before adopting it. The simple reader runs `read()` in the driver's Python
streaming process and hands Spark rows as Python tuples (PySpark 4.2's interface has no Arrow form),
so it saves the Spark tasks of a micro-batch but pays a Python object per record. This benchmark
registers, beside `pylog`, a source `pylog-simple` whose reader plans the same offsets (pylog's own
stream reader) and reads them in the driver with the same native fetcher, then compares the median
micro-batch time of both into the noop sink at several rows per batch, in one local[2] session.

Usage: .venv/bin/python bench/simple_stream_reader.py [--records 300000] [--rows 1000,10000,50000]
       [--batches 12] [--append-results]
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
from typing import Any, Iterator

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pyspark.errors.exceptions.base import PySparkNotImplementedError  # noqa: E402
from pyspark.sql.datasource import SimpleDataSourceStreamReader  # noqa: E402

from bench._common import spark_env, start_pylog  # noqa: E402
from bench.spark_read import batch_durations, load_topic  # noqa: E402
from sparklog.source import PylogDataSource  # noqa: E402


class SimpleReader(SimpleDataSourceStreamReader):
    """pylog's planning (offsets, admission control) with reads in the driver, rows as tuples."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def initialOffset(self) -> dict:
        return self.stream.initialOffset()

    def read(self, start: dict) -> tuple[Iterator[tuple], dict]:
        from pyspark.sql.streaming.datasource import ReadMaxRows

        limit = ReadMaxRows(self.stream.opts.max_offsets_per_trigger) if self.stream.opts.max_offsets_per_trigger \
            else self.stream.getDefaultReadLimit()
        end = self.stream.latestOffset(start, limit)
        return self.readBetweenOffsets(start, end), end

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[tuple]:
        from sparklog.executor import read_task

        rows: list[tuple] = []
        for task in self.stream.partitions(start, end):
            for batch in read_task(task, self.stream.settings):
                rows.extend(zip(*(c.to_pylist() for c in batch.columns)))
        return iter(rows)

    def commit(self, end: dict) -> None:
        self.stream.commit(end)


class SimpleSource(PylogDataSource):
    """`pylog-simple`: Spark falls back to simpleStreamReader when streamReader is not implemented."""

    @classmethod
    def name(cls) -> str:
        return "pylog-simple"

    def streamReader(self, schema: Any) -> Any:
        raise PySparkNotImplementedError(errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "streamReader"})

    def simpleStreamReader(self, schema: Any) -> SimpleReader:
        return SimpleReader(PylogDataSource(self.options).streamReader(schema))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--rows", default="1000,10000,50000")
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--append-results", action="store_true")
    args = ap.parse_args()
    spark_env()

    from pyspark.sql import SparkSession

    work = Path(tempfile.mkdtemp(prefix="pylog-simple-bench-"))
    broker = start_pylog(work / "data")
    results: list[tuple[int, float, float]] = []
    load = os.getloadavg()[0]
    try:
        load_topic(broker.bootstrap, "bench", args.records, 100, 8, "lz4")
        spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
        spark.sparkContext.setLogLevel("OFF")
        spark.dataSource.register(SimpleSource)
        for rows in (int(r) for r in args.rows.split(",")):
            medians = []
            for fmt in ("pylog", "pylog-simple"):
                q = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap)
                     .option("subscribe", "bench").option("startingOffsets", "earliest")
                     .option("maxOffsetsPerTrigger", str(rows)).load()
                     .writeStream.format("noop").option("checkpointLocation", str(work / f"cp-{fmt}-{rows}"))
                     .trigger(processingTime="0 seconds").start())
                durations = batch_durations(q, args.batches)
                medians.append(statistics.median(durations[2:]) * 1000)
            results.append((rows, medians[0], medians[1]))
            print(f"{rows:>7,} rows/batch: pylog {medians[0]:.0f} ms, pylog-simple {medians[1]:.0f} ms", flush=True)
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    table = "| rows per micro-batch | DataSourceStreamReader (pylog) | SimpleDataSourceStreamReader | ratio |\n" \
            "| ---: | ---: | ---: | ---: |\n" + "\n".join(
                f"| {r:,} | {a:.0f} ms | {b:.0f} ms | {b / a:.2f} |" for r, a, b in results)
    print(table)
    if args.append_results:
        cmd = " ".join(shlex.quote(a) for a in [".venv/bin/python", "bench/simple_stream_reader.py", *sys.argv[1:]])
        with open(REPO / "bench" / "RESULTS.md", "a") as f:
            f.write(f"\n## SimpleDataSourceStreamReader against pylog's stream reader (bench/simple_stream_reader.py), "
                    f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC\n\nCommand: `{cmd}`. Machine: nproc "
                    f"{os.cpu_count()}, load average {load:.1f} at the start. Median micro-batch time into noop, "
                    f"first two batches left out.\n\n{table}\n")


if __name__ == "__main__":
    main()
