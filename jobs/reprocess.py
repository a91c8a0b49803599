"""`pylog job reprocess`: Hadoop-style offline reprocessing by rewinding offsets.

Rewinds to `reprocess.from` (earliest | timestamp:<epoch ms or ISO-8601> | offsets:<JSON>), reads up
to the current end, and rebuilds the table in one atomic Delta commit: into `reprocess.target.path`
(a new table), or, with reprocess.mode=replace, replacing `sink.table.path` (an overwrite commit
under a new generation, whose offsets `stream_to_delta` then resumes from). Shows progress.
"""
from __future__ import annotations

import datetime
import json
import logging
import threading
from typing import Any

from connectors.offset_manager import OffsetManager, end_offsets, rewind_offsets
from connectors.offset_txns import parse_offsets_json, to_starting_offsets_json
from jobs.config import JobConfig, JobConfigError
from jobs.rows import source_options, table_rows
from jobs.spark_session import build_session

log = logging.getLogger("pylog.job.reprocess")


def parse_from(cfg: JobConfig) -> tuple[str, Any]:
    v = cfg.get("reprocess.from", "earliest")
    if v == "earliest":
        return "earliest", None
    if v.startswith("timestamp:"):
        raw = v[len("timestamp:"):].strip()
        if raw.isdigit():
            return "timestamp", int(raw)
        try:
            dt = datetime.datetime.fromisoformat(raw)
        except ValueError:
            raise JobConfigError(f"job reprocess: reprocess.from timestamp must be epoch ms or ISO-8601, got {raw!r}") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=datetime.timezone.utc)
        return "timestamp", int(dt.timestamp() * 1000)
    if v.startswith("offsets:"):
        try:
            return "offsets", parse_offsets_json(v[len("offsets:"):])
        except (ValueError, TypeError, AttributeError) as e:
            raise JobConfigError(f"job reprocess: reprocess.from offsets must be JSON like {{\"t\":{{\"0\":5}}}}: {e}") from None
    raise JobConfigError(f"job reprocess: reprocess.from must be earliest, timestamp:<ms|ISO> or offsets:<JSON>, got {v!r}")


def _progress(spark: Any, done: threading.Event) -> None:
    """A progress bar over the running Spark stages' tasks, until `done`."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    tracker = spark.sparkContext.statusTracker()
    with Progress(TextColumn("reprocessing"), BarColumn(), TextColumn("{task.completed}/{task.total} tasks"),
                  TimeElapsedColumn(), transient=False) as bar:
        task = bar.add_task("reprocess", total=None)
        while not done.wait(0.5):
            total = completed = 0
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info:
                    total += info.numTasks
                    completed += info.numCompletedTasks
            if total:
                bar.update(task, total=total, completed=completed)


def run(cfg: JobConfig) -> int:
    bootstrap = cfg.require("source.bootstrap.servers")
    topics = cfg.list("source.topics")
    table = cfg.require("sink.table.path")
    app_id = cfg.get("sink.app.id", cfg.name)
    mode = cfg.get("reprocess.mode", "new-table")
    if mode not in ("new-table", "replace"):
        raise JobConfigError(f"job reprocess: reprocess.mode must be new-table or replace, got {mode!r}")
    target = table if mode == "replace" else cfg.require("reprocess.target.path")
    kind, value = parse_from(cfg)
    ends = end_offsets(bootstrap, topics)
    if kind == "offsets":
        starts = {t: {p: value.get(t, {}).get(p, -2) for p in parts} for t, parts in ends.items()}
    else:
        starts = rewind_offsets(bootstrap, topics, timestamp_ms=value)
    generation = (OffsetManager(target, app_id).generation() or 0) + 1 if mode == "replace" else 0
    log.info("reprocessing %s from %s to %s into %s (%s)", topics, to_starting_offsets_json(starts),
             to_starting_offsets_json(ends), target, mode)
    spark = build_session(cfg, f"pylog reprocess {app_id}")
    df = (spark.read.format("pylog").options(**source_options(cfg))
          .option("startingOffsets", json.dumps({t: {str(p): o for p, o in ps.items()} for t, ps in starts.items()}))
          .option("endingOffsets", to_starting_offsets_json(ends)).load())
    if kind == "timestamp":
        from pyspark.sql import functions as F

        df = df.where(F.col("timestamp") >= F.timestamp_millis(F.lit(value)))
    rows = table_rows(df, cfg.get("value.schema"))
    done = threading.Event()
    bar = threading.Thread(target=_progress, args=(spark, done), daemon=True)
    bar.start()
    try:
        writer = (rows.write.format("pylog-delta").mode("overwrite").option("path", target).option("appId", app_id)
                  .option("generation", str(generation)).option("batchId", "0")
                  .option("offsets", to_starting_offsets_json(ends)).option("mergeSchema", "true"))
        if cfg.get("sink.partition.by"):
            writer = writer.option("partitionBy", cfg.require("sink.partition.by"))
        writer.save()
    finally:
        done.set()
        bar.join(2)
    log.info("rebuilt %s up to offsets %s", target, to_starting_offsets_json(ends))
    return 0
