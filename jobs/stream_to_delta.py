"""`pylog job stream_to_delta`: topics → Delta, exactly once, as a Spark Structured Streaming query.

Settings (conf/jobs/stream_to_delta.properties): source.bootstrap.servers, source.topics,
source.starting.offsets (earliest|latest|JSON), source.max.offsets.per.trigger, sink.table.path,
sink.checkpoint.location, sink.app.id, trigger (available-now | processing-time=<interval>),
value.schema (a DDL string; empty keeps raw bytes), sink.partition.by, sink.merge.schema,
group.mirror (a consumer group that mirrors the table's offsets so lag tools see them).

Restarts: the real checkpoint is `<sink.checkpoint.location>/gen-<g>`, where g is the table's
generation for this app. When that directory is gone (lost checkpoint, or the table was rebuilt by
`reprocess`), the job starts a new generation from the offsets committed in the table itself.
SIGTERM stops the query after the batch in flight.
"""
from __future__ import annotations

import json
import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any

from connectors.offset_manager import OffsetManager
from jobs.config import JobConfig
from jobs.rows import source_options, table_rows
from jobs.spark_session import build_session

log = logging.getLogger("pylog.job.stream_to_delta")


def plan_generation(table: str, app_id: str, checkpoint_base: str) -> tuple[int, Path, str | None]:
    """(generation, checkpoint dir, starting offsets from the table or None)."""
    om = OffsetManager(table, app_id)
    current = om.generation()
    base = Path(checkpoint_base)
    if current is not None and (base / f"gen-{current}").exists():
        return current, base / f"gen-{current}", None
    if current is None:
        # nothing committed yet for this app: resume a generation-0 checkpoint if one was started
        return 0, base / "gen-0", None
    gen = current + 1
    return gen, base / f"gen-{gen}", om.starting_offsets_json()


class _ProgressLogger:
    """Logs one line per batch (rows, end offsets, lag) and mirrors the table's offsets into a group."""

    def __init__(self, om: OffsetManager, bootstrap: str, group: str | None) -> None:
        self.om, self.bootstrap, self.group = om, bootstrap, group

    @staticmethod
    def _offsets(raw: str | None) -> dict[str, dict[str, int]]:
        value = json.loads(raw) if raw else None
        return value if isinstance(value, dict) else {}

    def __call__(self, progress: Any) -> None:
        try:
            src = progress.sources[0] if progress.sources else None
            end = self._offsets(src.endOffset if src else None)
            latest = self._offsets(src.latestOffset if src else None) or end
            lag = sum(max(0, int(o) - int(end.get(t, {}).get(p, 0))) for t, ps in latest.items() for p, o in ps.items())
            log.info("batch %d: %d rows, offsets %s, lag %d", progress.batchId, progress.numInputRows,
                     json.dumps(end, sort_keys=True), lag)
        except Exception as e:  # noqa: BLE001 - reporting must never stop the job
            log.warning("batch %d: could not report progress: %s", progress.batchId, e)
        if self.group:
            try:
                self.om.mirror_to_group(self.bootstrap, self.group)
            except Exception as e:  # noqa: BLE001 - lag mirroring must never stop the job
                log.warning("could not mirror offsets to group %s: %s", self.group, e)


def run(cfg: JobConfig) -> int:
    table = cfg.require("sink.table.path")
    app_id = cfg.get("sink.app.id", cfg.name)
    trigger = cfg.trigger()
    options = source_options(cfg)
    gen, checkpoint, table_offsets = plan_generation(table, app_id, cfg.require("sink.checkpoint.location"))
    starting = table_offsets or cfg.get("source.starting.offsets", "earliest")
    log.info("app %s generation %d, checkpoint %s, starting offsets %s", app_id, gen, checkpoint,
             "from the checkpoint" if checkpoint.exists() else starting)
    spark = build_session(cfg, f"pylog stream_to_delta {app_id}")
    reader = spark.readStream.format("pylog").options(**options).option("startingOffsets", starting)
    if cfg.get("source.max.offsets.per.trigger"):
        reader = reader.option("maxOffsetsPerTrigger", cfg.require("source.max.offsets.per.trigger"))
    rows = table_rows(reader.load(), cfg.get("value.schema"))
    writer = (rows.writeStream.format("pylog-delta").option("path", table).option("appId", app_id)
              .option("generation", str(gen)).option("checkpointLocation", str(checkpoint))
              .option("mergeSchema", cfg.get("sink.merge.schema", "false")))
    if cfg.get("sink.partition.by"):
        writer = writer.option("partitionBy", cfg.require("sink.partition.by"))
    query = writer.trigger(**trigger).start()
    return _supervise(query, _ProgressLogger(OffsetManager(table, app_id), cfg.require("source.bootstrap.servers"),
                                             cfg.get("group.mirror")))


def _supervise(query: Any, on_progress: _ProgressLogger) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    seen = -1
    while query.isActive:
        query.awaitTermination(0.5)
        for p in query.recentProgress:
            if p.batchId > seen:
                seen = p.batchId
                on_progress(p)
        if stop.is_set():
            log.info("SIGTERM: stopping after the batch in flight")
            while query.isActive and query.status.get("isTriggerActive"):
                time.sleep(0.2)
            query.stop()
    for p in query.recentProgress:
        if p.batchId > seen:
            seen = p.batchId
            on_progress(p)
    exc = query.exception()
    if exc is not None:
        log.error("query failed: %s", exc)
        return 1
    return 0
