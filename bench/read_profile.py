"""Where the time of a `format("pylog")` batch read goes (issue 9): three measurements, one run.

1. The executor's work alone, outside Spark: every partition read with `executor.read_range` (native
   Fetch client + Rust decoder) in this process, with cProfile's top entries.
2. The same read through Spark (local[2], noop sink), with the CPU seconds of the JVM, the Python
   workers and the broker over the read, from /proc.
3. The ceiling of Spark's Python data source path itself: a source whose read() yields ready-made
   Arrow batches of the same schema and size (no Kafka at all).

Usage: .venv/bin/python bench/read_profile.py [--records 3000000] [--partitions 8] [--compression lz4]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402

from bench._common import cpu_seconds, spark_env, start_pylog  # noqa: E402
from bench.spark_read import load_topic  # noqa: E402


def ready_made_batch(n: int) -> Any:
    """n rows of pylog's Arrow schema (8-byte keys, 100-byte values), built without Kafka."""
    import pyarrow as pa

    from sparklog.schema import arrow_schema

    cols = [pa.array([b"%08d" % i for i in range(n)], pa.binary()), pa.array([b"x" * 100] * n, pa.binary()),
            pa.array(["bench"] * n), pa.array([0] * n, pa.int32()), pa.array(range(n), pa.int64()),
            pa.array([0] * n, pa.timestamp("us", tz="UTC")), pa.array([0] * n, pa.int32())]
    return pa.RecordBatch.from_arrays(cols, schema=arrow_schema(False))


class _CeilingReader(DataSourceReader):
    def __init__(self, rows: int, tasks: int = 2) -> None:
        self.rows = rows
        self.tasks = tasks

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.tasks)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from sparklog.schema import ARROW_BATCH_ROWS

        n = ARROW_BATCH_ROWS
        batch = ready_made_batch(n)
        for _ in range(self.rows // self.tasks // n):
            yield batch
        if self.rows // self.tasks % n:
            yield batch.slice(0, self.rows // self.tasks % n)


class CeilingSource(DataSource):
    """Ready-made Arrow batches of the pylog schema: what Spark's Python source path costs by itself."""

    @classmethod
    def name(cls) -> str:
        return "arrow-ceiling"

    def schema(self) -> Any:
        from sparklog.schema import spark_schema

        return spark_schema(False)

    def reader(self, schema: Any) -> _CeilingReader:
        return _CeilingReader(int(self.options.get("rows", "3000000")), int(self.options.get("tasks", "2")))


def _descendants(root: int) -> set[int]:
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - found
        found |= frontier
    return found


def _processes() -> dict[int, tuple[str, float]]:
    """CPU seconds so far of this benchmark's JVM, Python workers and broker (its descendants only)."""
    out = {}
    for pid in _descendants(os.getpid()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            exe = cmd.split(b"\0", 1)[0]
            kind = ("jvm" if exe.endswith(b"java") else "python workers" if b"pyspark" in cmd
                    else "broker" if b"broker" in cmd else "other")
            out[pid] = (kind, cpu_seconds(pid))
        except OSError:
            continue
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--compression", default="lz4")
    args = ap.parse_args()
    spark_env()

    from pyspark.sql import SparkSession

    from sparklog.executor import read_range
    from sparklog.kafka_client import LATEST, ClientConfig, KafkaClient
    from sparklog.options import parse_batch_options
    from sparklog.planner import OffsetRange
    from sparklog.reader_settings import ReaderSettings

    work = Path(tempfile.mkdtemp(prefix="pylog-read-profile-"))
    broker = start_pylog(work / "data")
    try:
        bs = broker.bootstrap
        load_topic(bs, "bench", args.records, 100, args.partitions, args.compression)
        client = KafkaClient(ClientConfig(bs))
        ends = {p: client.list_offset("bench", p, LATEST) for p in range(args.partitions)}
        client.close()
        settings = ReaderSettings.from_options(parse_batch_options({"kafka.bootstrap.servers": bs, "subscribe": "bench"}))
        for attempt in range(2):   # the first pass warms the page cache and imports
            profile = cProfile.Profile()
            t0 = time.perf_counter()
            profile.enable()
            rows = sum(b.num_rows for p in range(args.partitions)
                       for b in read_range(OffsetRange("bench", p, 0, ends[p]), settings))
            profile.disable()
            took = time.perf_counter() - t0
        print(f"1. executor work outside Spark: {rows:,} rows in {took:.2f} s = {rows / took / 1e6:.1f} M rows/s "
              "on one core")
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(6)
        print("\n".join(line for line in text.getvalue().splitlines() if line.strip())[-900:])

        spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(CeilingSource)
        cases = {"pylog": lambda: spark.read.format("pylog").option("kafka.bootstrap.servers", bs)
                 .option("subscribe", "bench").load(),
                 "arrow-ceiling": lambda: spark.read.format("arrow-ceiling").option("rows", str(args.records)).load()}
        for name, df in cases.items():
            df().write.format("noop").mode("overwrite").save()     # warm-up
        for name, df in cases.items():
            best: tuple[float, dict[str, float]] | None = None
            for _ in range(3):
                before = _processes()
                t0 = time.perf_counter()
                df().write.format("noop").mode("overwrite").save()
                took = time.perf_counter() - t0
                use: dict[str, float] = {}
                for pid, (kind, cpu) in _processes().items():
                    use[kind] = use.get(kind, 0.0) + cpu - before.get(pid, (kind, 0.0))[1]
                if best is None or took < best[0]:
                    best = (took, use)
            assert best is not None
            split = ", ".join(f"{k} {v:.2f} CPU-s" for k, v in sorted(best[1].items()))
            print(f"{'2' if name == 'pylog' else '3'}. Spark read, {name}: {args.records / best[0]:,.0f} rows/s "
                  f"(best of 3: {best[0]:.2f} s; {split})")
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
