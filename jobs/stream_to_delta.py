"""`pylog job stream_to_delta`: topics → Delta, exactly once, as a Spark Structured Streaming query.

Settings (conf/jobs/stream_to_delta.properties): source.bootstrap.servers, source.topics,
source.starting.offsets (earliest|latest|JSON), source.max.offsets.per.trigger, sink.table.path,
sink.checkpoint.location, sink.app.id, trigger (available-now | processing-time=<interval>),
value.schema (a DDL string; empty keeps raw bytes), sink.partition.by, sink.merge.schema,
group.mirror (a consumer group that mirrors the table's offsets so lag tools see them), sink.engine
(delta-rs: the pylog-delta sink; delta-spark: each micro-batch through foreachBatch into one delta-spark
commit, jobs.sink_engine), sink.mode and sink.merge.key (merge: upserts and deletes by key).

Restarts: the real checkpoint is `<sink.checkpoint.location>/gen-<g>`, where g is the table's
generation for this app. When that directory is gone (lost checkpoint, the table rebuilt by
`reprocess`, or another stream took over the app id), the job claims a new generation in the table,
which fences any older writer of the app, and starts from the offsets committed in the table itself,
checked against the live topics (a re-created topic is an error with source.fail.on.data.loss=true,
otherwise read from its start). A fenced stream stops with a message saying so; restart it.
SIGTERM and SIGINT stop the query after the batch in flight.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from connectors.delta_commit import claim_generation
from connectors.delta_sink import arrow_schema, writer_options
from connectors.offset_manager import OffsetManager, live_log, resume_from
from jobs.config import JobConfig
from jobs.errors import JobFailed, root_cause
from jobs.rows import source_options, table_rows
from jobs.signals import STOPPER
from jobs.sink_engine import DeltaSparkStreamWriter, check_keys, sink_choice, table_columns
from jobs.spark_session import build_session
from sparklog.offsets import PartitionOffsets, from_offset_dict, to_json
from sparklog.planner import backlog

log = logging.getLogger("pylog.job.stream_to_delta")



@dataclass(frozen=True)
class Plan:
    generation: int
    checkpoint: Path
    starting_offsets: str | None   # None: Spark resumes from the checkpoint


def plan_generation(cfg: JobConfig, table: str, app_id: str, schema: pa.Schema, partition_by: list[str]) -> Plan:
    """Resume this app's generation from its checkpoint, or claim a new one and start from the table."""
    om = OffsetManager(table, app_id)
    base = Path(cfg.require("sink.checkpoint.location"))
    current = om.state().generation
    if current is not None and (base / f"gen-{current}").exists():
        return Plan(current, base / f"gen-{current}", None)
    claim = claim_generation(table, app_id, schema, partition_by)
    gen = claim.generation or 0
    checkpoint = base / f"gen-{gen}"
    if checkpoint.exists():   # left by a run that never committed under this generation's claim
        checkpoint.rename(checkpoint.with_name(f"{checkpoint.name}.abandoned-{int(time.time())}"))
    if not claim.offsets:
        return Plan(gen, checkpoint, cfg.get("source.starting.offsets", "earliest"))
    default = cfg.get("source.starting.offsets", "earliest")
    starts = resume_from(claim, live_log(source_options(cfg)), new="latest" if default == "latest" else "earliest",
                         fail_on_data_loss=cfg.bool("source.fail.on.data.loss", True))
    return Plan(gen, checkpoint, to_json(starts))


class _ProgressLogger:
    """Logs one line per batch (rows, end offsets, lag) and mirrors the table's offsets into a group."""

    def __init__(self, om: OffsetManager, bootstrap: str, group: str | None) -> None:
        self.om, self.bootstrap, self.group = om, bootstrap, group

    @staticmethod
    def _offsets(raw: str | None) -> PartitionOffsets:
        """A source offset of Spark's progress (the streaming offset JSON, topic ids aside); {} when none."""
        value = json.loads(raw) if raw else None
        return from_offset_dict(value) if isinstance(value, dict) else {}

    def __call__(self, progress: Any) -> None:
        try:
            src = progress.sources[0] if progress.sources else None
            end = self._offsets(src.endOffset if src else None)
            latest = self._offsets(src.latestOffset if src else None) or end
            log.info("batch %d: %d rows, offsets %s, lag %d", progress.batchId, progress.numInputRows,
                     to_json(end), backlog(end, latest))
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
    partition_by = cfg.list("sink.partition.by")
    choice = sink_choice(cfg)
    spark = build_session(cfg, f"pylog stream_to_delta {app_id}", delta_spark=choice.delta_spark)
    probe = table_rows(spark.readStream.format("pylog").options(**options).load(), cfg.get("value.schema"), choice.merge)
    check_keys(cfg, choice, probe)
    plan = plan_generation(cfg, table, app_id, arrow_schema(table_columns(probe).schema), partition_by)
    log.info("app %s generation %d, checkpoint %s, starting offsets %s", app_id, plan.generation, plan.checkpoint,
             plan.starting_offsets or "from the checkpoint")
    reader = spark.readStream.format("pylog").options(**options)
    if plan.starting_offsets:
        reader = reader.option("startingOffsets", plan.starting_offsets)
    if cfg.get("source.max.offsets.per.trigger"):
        reader = reader.option("maxOffsetsPerTrigger", cfg.require("source.max.offsets.per.trigger"))
    rows = table_rows(reader.load(), cfg.get("value.schema"), choice.merge)
    merge_schema = cfg.bool("sink.merge.schema", False)
    if choice.delta_spark:
        writer = DeltaSparkStreamWriter(table, app_id, plan.generation, str(plan.checkpoint), choice, partition_by,
                                        merge_schema)
        query = (rows.writeStream.foreachBatch(writer).option("checkpointLocation", str(plan.checkpoint))
                 .trigger(**trigger).start())
    else:
        query = (rows.writeStream.format("pylog-delta")
                 .options(**writer_options(table, app_id, partition_by=partition_by, merge_schema=merge_schema,
                                           generation=plan.generation, checkpoint=str(plan.checkpoint)))
                 .trigger(**trigger).start())
    return _supervise(query, _ProgressLogger(OffsetManager(table, app_id), cfg.require("source.bootstrap.servers"),
                                             cfg.get("group.mirror")))


def _supervise(query: Any, on_progress: _ProgressLogger) -> int:
    STOPPER.graceful = True
    stop = STOPPER.requested
    seen = -1
    while query.isActive:
        query.awaitTermination(0.5)
        for p in query.recentProgress:
            if p.batchId > seen:
                seen = p.batchId
                on_progress(p)
        if stop.is_set():
            log.info("stopping after the batch in flight (signal received; a second one stops at once)")
            while query.isActive and query.status.get("isTriggerActive"):
                time.sleep(0.2)
            query.stop()
    for p in query.recentProgress:
        if p.batchId > seen:
            seen = p.batchId
            on_progress(p)
    exc = query.exception()
    if exc is not None:
        raise JobFailed(root_cause(exc))
    return 0
