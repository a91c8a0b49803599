"""Benchmark (issue 13): `pylog job maintain` on a large Delta table of many small files.

Builds a Delta table of --gb GB (default 10, GB = 10^9 bytes of Parquet) the way a stream leaves it:
one append per micro-batch with delta-rs (`write_deltalake`, what the pylog-delta sink commits with),
each one Parquet file of about --file-mb MB (default 8), each commit carrying pylog's txns for the
batch (marker, generation and the end offsets of 8 partitions of topic `events`, connectors.offset_txns
.batch_txns), so the job has an app's offsets to check and report. The rows have the columns
`pylog job stream_to_delta` writes (topic, partition, offset, event_time, key, the JSON fields, ingested_at)
with random ids and amounts, so the files do not compress to nothing; the rows per file are calibrated
on the first file. Then it runs the job as users do, in its own process:

    .venv/bin/python -m pylog job maintain --set sink.table.path=TABLE --set maintain.report.path=... [--set ...]

with conf/jobs/maintain.properties (OPTIMIZE, VACUUM, checkpoint with log cleanup) and
maintain.vacuum.retention.hours = --retention-hours (default 0, with
spark.databricks.delta.retentionDurationCheck.enabled=false: VACUUM then deletes the files the compaction
just replaced, i.e. the full cost of a vacuum; with the job's default 168 hours a freshly built table has
nothing old enough to delete and VACUUM only lists the files).

What is timed: the job's process from start to exit (wall clock), and its phases from the timestamps of
the lines it logs: start-up (JVM, session, reading the table's offsets and facts; up to "maintaining"),
compaction (OPTIMIZE), vacuum, checkpoint (with log cleanup) and the closing report (facts and offsets
read again). The table build is reported but not part of the figure. Also reported: files and bytes
before and after (the job's own report), the size on disk before and after, and the offsets it kept.

Usage:
    .venv/bin/python bench/maintain_bench.py [--gb 10] [--file-mb 8] [--retention-hours 0]
        [--workdir /tmp] [--keep] [--set KEY=VALUE ...] [--out FILE.json]
Needs delta-spark's jars (`make .stamps/jars-delta-spark`) and, free on the work directory's file system,
3x the table's size (the table, its compacted copy, Spark's scratch); it refuses to start otherwise.
The table lives in a new temporary directory under --workdir, removed afterwards unless --keep.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import PYTHON, write_json  # noqa: E402

TOPIC, PARTITIONS, APP_ID = "events", 8, "events-to-delta"
GB = 10**9
# the job's log lines that end each phase (jobs/maintain.py), in order
PHASES = [("startup", re.compile(r"pylog\.job\.maintain: maintaining ")),
          ("compaction", re.compile(r"pylog\.job\.maintain: OPTIMIZE")),
          ("vacuum", re.compile(r"pylog\.job\.maintain: VACUUM RETAIN")),
          ("checkpoint", re.compile(r"pylog\.job\.maintain: checkpoint at version")),
          ("report", re.compile(r"pylog\.job\.maintain: maintained "))]
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def dir_bytes(path: Path) -> tuple[int, int]:
    """(data files, bytes of all files including the log) under `path`, as `du` would add them up."""
    files = size = 0
    for root, _dirs, names in os.walk(path):
        for n in names:
            size += os.path.getsize(os.path.join(root, n))
            files += n.endswith(".parquet") and "_delta_log" not in Path(root).parts
    return files, size


def check_disk(where: Path, need_bytes: int) -> None:
    free = shutil.disk_usage(where).free
    if free < need_bytes:
        raise SystemExit(f"refusing to start: {where} has {free / GB:.1f} GB free, and this benchmark needs "
                         f"{need_bytes / GB:.1f} GB (3x the table: the table, its compacted copy, Spark's scratch); "
                         "use a smaller --gb or a --workdir on a larger file system")


class BatchMaker:
    """Micro-batches of stream_to_delta's rows (pyarrow only): each file holds a run of offsets from every
    partition, as a micro-batch does; ids, users and amounts are random bytes."""

    def __init__(self) -> None:
        self.next_offset = [0] * PARTITIONS
        self.count = 0

    @staticmethod
    def _random(kind: Any, rows: int) -> Any:   # -> pyarrow.Array of random `kind` (a fixed-width int type)
        import pyarrow as pa

        return pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(os.urandom(rows * kind.bit_width // 8))])

    def make(self, rows: int) -> Any:   # -> pyarrow.Table
        import pyarrow as pa
        import pyarrow.compute as pc

        per = [rows // PARTITIONS + (p < rows % PARTITIONS) for p in range(PARTITIONS)]
        part = pa.concat_arrays([pa.array([p] * n, pa.int32()) for p, n in enumerate(per)])
        offset = pa.concat_arrays([pa.array(range(self.next_offset[p], self.next_offset[p] + n), pa.int64())
                                   for p, n in enumerate(per)])
        for p, n in enumerate(per):
            self.next_offset[p] += n
        now_us = int(time.time() * 1e6)
        seq = pa.array(range(self.count, self.count + rows), pa.int64())
        self.count += rows
        jitter = pc.bit_wise_and(self._random(pa.int64(), rows), 1023)
        event_us = pc.add(pc.add(pc.multiply(seq, 1000), now_us - 3_600_000_000), jitter)
        users = pc.cast(pc.bit_wise_and(self._random(pa.uint32(), rows), 0xFFFF), pa.string())
        kinds = pc.bit_wise_and(self._random(pa.uint8(), rows), 3)
        amount = pc.divide(pc.cast(pc.bit_wise_and(self._random(pa.uint32(), rows), 0xFFFFF), pa.float64()), 100.0)
        return pa.table({
            "topic": pa.array([TOPIC] * rows, pa.string()),
            "partition": part,
            "offset": offset,
            "event_time": pc.cast(event_us, pa.timestamp("us", tz="UTC")),
            "key": users,
            "event_id": pc.cast(self._random(pa.uint64(), rows), pa.string()),
            "user_id": pc.binary_join_element_wise("user-", users, ""),
            "type": pa.array(["click", "view", "purchase", "scroll"]).take(kinds),
            "amount": amount,
            "ts": pc.divide(event_us, 1000),
            "ingested_at": pc.cast(pc.add(pc.bit_wise_and(seq, 0xFFFFF), now_us), pa.timestamp("us", tz="UTC")),
        })

    def end_offsets(self) -> dict[tuple[str, int], int]:
        return {(TOPIC, p): o for p, o in enumerate(self.next_offset)}


def append_batch(table: Path, data: Any, batch_id: int, offsets: dict[tuple[str, int], int], version: int) -> None:
    """One micro-batch as the pylog-delta sink leaves it: one commit, its files and the batch's txns."""
    from deltalake import CommitProperties, Transaction, write_deltalake

    from connectors.offset_txns import batch_txns
    from sparklog.offsets import to_json

    txns = batch_txns(APP_ID, 0, batch_id, offsets, {}, version)
    meta = {"pylog.appId": APP_ID, "pylog.batchId": str(batch_id), "pylog.generation": "0",
            "pylog.offsets": to_json(offsets)}
    write_deltalake(str(table), data, mode="append", commit_properties=CommitProperties(
        custom_metadata=meta, app_transactions=[Transaction(k, v) for k, v in txns.items()]))


def build_table(table: Path, target_bytes: int, file_mb: float) -> dict[str, Any]:
    """Append ~file_mb MB files until the table holds target_bytes of Parquet; progress on stderr."""
    maker = BatchMaker()
    t0 = time.perf_counter()
    probe_rows = 100_000
    append_batch(table, maker.make(probe_rows), 0, maker.end_offsets(), 0)
    per_row = dir_bytes(table / "")[1] / probe_rows   # the first commit's file (plus a small log entry)
    rows = max(1000, int(file_mb * 1e6 / per_row))
    written, batch, last_report = probe_rows * per_row, 1, 0.0
    while written < target_bytes:
        append_batch(table, maker.make(rows), batch, maker.end_offsets(), batch)
        written += rows * per_row
        batch += 1
        if time.perf_counter() - last_report > 10 or written >= target_bytes:
            last_report = time.perf_counter()
            el = last_report - t0
            print(f"building: {batch:,} files, ~{written / GB:.2f} of {target_bytes / GB:.2f} GB, {el:.0f} s, "
                  f"{written / 1e6 / el:.0f} MB/s", file=sys.stderr, flush=True)
    files, size = dir_bytes(table)
    return {"seconds": round(time.perf_counter() - t0, 1), "commits": batch, "rows_per_file": rows,
            "rows": maker.count, "data_files": files, "bytes_on_disk": size}


def phase_times(log_text: str, started_wall: float) -> dict[str, float]:
    """Seconds of each phase, from the timestamps of the job's log lines (local time, as logging writes them)."""
    out: dict[str, float] = {}
    prev = started_wall
    for line in log_text.splitlines():
        m = LOG_TIME.match(line)
        if not m:
            continue
        for name, pattern in PHASES:
            if name not in out and pattern.search(line):
                t = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                out[name] = round(t - prev, 2)
                prev = t
    return out


def run_maintain(table: Path, report_path: Path, retention_hours: float, sets: list[str],
                 log_path: Path) -> dict[str, Any]:
    cmd = [PYTHON, "-m", "pylog", "job", "maintain", "--set", f"sink.table.path={table}",
           "--set", f"maintain.report.path={report_path}",
           "--set", f"maintain.vacuum.retention.hours={retention_hours:g}"]
    if retention_hours < 168:
        cmd += ["--set", "spark.databricks.delta.retentionDurationCheck.enabled=false"]
    for s in sets:
        cmd += ["--set", s]
    print("running: " + " ".join(cmd), file=sys.stderr, flush=True)
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    started_wall = time.time()
    t0 = time.perf_counter()
    with open(log_path, "w") as logf:
        proc = subprocess.run(cmd, cwd=REPO, stdout=logf, stderr=subprocess.STDOUT, env=env)
    seconds = time.perf_counter() - t0
    log_text = log_path.read_text()
    if proc.returncode != 0:
        raise SystemExit(f"pylog job maintain exited with {proc.returncode}; its log:\n{log_text[-4000:]}")
    phases = phase_times(log_text, started_wall)
    phases["exit"] = round(seconds - sum(phases.values()), 2)   # after the last line: Spark stopping, JVM exit
    return {"seconds": round(seconds, 2), "phases_s": phases, "report": json.loads(report_path.read_text()),
            "command": cmd}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=10.0, help="table size in GB (10^9 bytes) of Parquet")
    ap.add_argument("--file-mb", type=float, default=8.0, help="size of each appended file (one per commit)")
    ap.add_argument("--retention-hours", type=float, default=0.0,
                    help="maintain.vacuum.retention.hours (default 0: vacuum deletes the compacted files)")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()),
                    help="where the table's temporary directory goes (default the system temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the table and the job's log afterwards")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="another setting for the job (repeatable), e.g. spark.driver.memory=4g")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON result to this file")
    args = ap.parse_args()
    target = int(args.gb * GB)
    args.workdir.mkdir(parents=True, exist_ok=True)
    check_disk(args.workdir, 3 * target)
    work = Path(tempfile.mkdtemp(prefix="pylog-maintain-bench-", dir=args.workdir))
    table = work / "table"
    load_start = os.getloadavg()[0]
    try:
        built = build_table(table, target, args.file_mb)
        print(f"built {table}: {built['data_files']:,} files, {built['bytes_on_disk'] / GB:.2f} GB on disk, "
              f"{built['rows']:,} rows, {built['commits']:,} commits in {built['seconds']:.0f} s",
              file=sys.stderr, flush=True)
        job = run_maintain(table, work / "report.json", args.retention_hours, args.set, work / "maintain.log")
        files_after, bytes_after = dir_bytes(table)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    rep = job["report"]
    result = {"bench": "maintain", "utc": f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M}", "gb": args.gb,
              "file_mb": args.file_mb, "retention_hours": args.retention_hours, "sets": args.set,
              "nproc": os.cpu_count(), "load_start": round(load_start, 2), "load_end": round(os.getloadavg()[0], 2),
              "build": built, "seconds": job["seconds"], "phases_s": job["phases_s"],
              "before": rep["before"], "after": rep["after"], "steps": rep["steps"],
              "on_disk_after": {"data_files": files_after, "bytes": bytes_after},
              "apps": rep.get("apps", {}), "problems": rep.get("problems", []),
              "kept": str(work) if args.keep else None}
    print(json.dumps(result))
    b, a = rep["before"], rep["after"]
    print(f"\n| pylog job maintain, {b['bytes'] / GB:.2f} GB table | |\n|---|---:|")
    print(f"| total (process start to exit) | {job['seconds']:.1f} s |")
    for name, s in job["phases_s"].items():
        print(f"| {name} | {s:.1f} s |")
    print(f"| files before -> after | {b['files']:,} -> {a['files']:,} |")
    print(f"| table bytes before -> after | {b['bytes'] / GB:.2f} -> {a['bytes'] / GB:.2f} GB |")
    print(f"| on disk before -> after (all versions) | {built['bytes_on_disk'] / GB:.2f} -> "
          f"{bytes_after / GB:.2f} GB |")
    print(f"\nvacuum retention {args.retention_hours:g} h; load average {load_start:.1f} -> {os.getloadavg()[0]:.1f}, "
          f"nproc {os.cpu_count()}" + (f"; kept in {work}" if args.keep else ""))
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
