"""`pylog job stream_to_delta`: topics → Delta, exactly once, as a Spark Structured Streaming query.

Settings (conf/jobs/stream_to_delta.properties): source.bootstrap.servers, source.topics,
source.starting.offsets (earliest|latest|JSON), source.max.offsets.per.trigger, sink.table.path,
sink.checkpoint.location, sink.app.id, trigger (available-now | processing-time=<interval>),
value.schema (a DDL string; empty keeps raw bytes), sink.partition.by, sink.merge.schema,
group.mirror (a consumer group that mirrors the table's offsets so lag tools see them), sink.engine
(delta-rs: the pylog-delta sink; delta-spark: each micro-batch through foreachBatch into one delta-spark
commit, jobs.sink_engine), sink.mode and sink.merge.key (merge: upserts and deletes by key).

Restarts: the real checkpoint is `<sink.checkpoint.location>/gen-<g>`, where g is the table's
generation for this app; the location records the table and app it belongs to, and refuses any other
(connectors.checkpoint_owner). The table's offsets are the truth and the checkpoint a cache of them: the
job resumes gen-<g> only while it agrees with the table (its last batch is the table's last batch of the
generation, and ends at the table's offsets). When it does not (lost checkpoint, the table rebuilt by
`reprocess`, a batch_load or another stream of the app committed since), the job claims a new generation
in the table, which fences any older writer of the app and stores the generation's start: the offsets
committed in the table, checked against the live topics (a re-created topic is an error with
source.fail.on.data.loss=true, otherwise read from its start), or source.starting.offsets resolved to
concrete offsets for an app the table has never seen. That start is passed as startingOffsets on every
run, so a run killed in its first batch re-runs it from the same offsets. Every commit checks that its
batch starts where the table's offsets end (connectors.contiguity). A fenced stream stops with a
message saying so; restart it.
SIGTERM and SIGINT stop the query after the batch in flight.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from connectors import checkpoint_owner
from connectors.delta_commit import claim_generation, open_table
from connectors.delta_sink import arrow_schema, writer_options
from connectors.offset_manager import OffsetManager, declared_start, live_log
from connectors.spark_checkpoint import progress
from connectors.table_location import TableLocation
from jobs.config import JobConfig
from jobs.rows import (add_raw_columns, check_value_settings, job_rows, observed, observed_counts, source_client_conf,
                       source_options)
from jobs.run_history import JobRun, recorded
from jobs.supervise import source_offsets, supervise
from jobs.sink_engine import DeltaSparkStreamWriter, check_keys, sink_choice, table_columns
from jobs.spark_session import build_session
from sparklog.offsets import to_json
from sparklog.planner import backlog

log = logging.getLogger("pylog.job.stream_to_delta")



@dataclass(frozen=True)
class Plan:
    generation: int
    checkpoint: Path
    starting_offsets: str | None   # None: Spark resumes from the checkpoint's committed batches


def _checkpoint_base(cfg: JobConfig, table: TableLocation, app_id: str) -> Path:
    """sink.checkpoint.location, refused when it belongs to another table or app, and marked as this job's."""
    base = Path(cfg.require("sink.checkpoint.location"))
    dt = open_table(table)
    owner = checkpoint_owner.Owner(str(table), None if dt is None else str(dt.metadata().id), app_id)
    found = checkpoint_owner.check(base, owner, "setting sink.checkpoint.location", table_exists=dt is not None)
    if found != owner and (found is None or dt is not None):
        checkpoint_owner.write(base, owner)
    return base


def plan_generation(cfg: JobConfig, base: Path, table: TableLocation, app_id: str, schema: pa.Schema,
                    partition_by: list[str]) -> Plan:
    """Resume this app's generation from its checkpoint while it agrees with the table, or claim a new one that
    starts from the table's offsets (see the module's docstring). `base` is the checkpoint location, already
    checked to be this job's (`_checkpoint_base`)."""
    om = OffsetManager(table, app_id)
    state = om.state()
    current = state.generation
    starting = cfg.get("source.starting.offsets", "earliest")
    fail_on_data_loss = cfg.bool("source.fail.on.data.loss", True)
    options = source_options(cfg)
    if current is not None and (base / f"gen-{current}").exists():
        checkpoint = base / f"gen-{current}"
        why = checkpoint_owner.disagreement(progress(str(checkpoint)), state, current)
        if why is None and state.marker(current) is not None:
            return Plan(current, checkpoint, None)
        if why is None:   # no batch of the generation committed yet: pass its declared start again
            start = declared_start(state, live_log(options), options, starting, fail_on_data_loss=fail_on_data_loss)
            moved = {tp: o for tp, o in start.items() if tp in state.offsets and state.offsets[tp] != o}
            if not moved:
                return Plan(current, checkpoint, to_json(start))
            why = f"the log changed under the generation's declared start ({to_json(moved)} now)"
        log.warning("checkpoint %s does not match table %s: %s; starting generation %d from the table's offsets",
                    checkpoint, table, why, current + 1)
    live = live_log(options)
    claim = claim_generation(table, app_id, schema, partition_by, topic_ids=live.topic_ids,
                             starts=lambda st: declared_start(st, live, options, starting,
                                                              fail_on_data_loss=fail_on_data_loss))
    gen = claim.generation or 0
    checkpoint = base / f"gen-{gen}"
    if checkpoint.exists():   # a generation number the table reached again (a RESTORE to an older version)
        aside = checkpoint.with_name(f"{checkpoint.name}.abandoned-{int(time.time())}")
        log.warning("checkpoint %s was made for an earlier generation %d of the table; moved to %s", checkpoint, gen,
                    aside)
        checkpoint.rename(aside)
    _checkpoint_base(cfg, table, app_id)   # the table exists now: record its id
    return Plan(gen, checkpoint, to_json({tp: o for tp, o in claim.offsets.items() if tp in live.latest}))


class _ProgressLogger:
    """Logs one line per batch (rows, end offsets, lag) and mirrors the table's offsets into a group."""

    def __init__(self, om: OffsetManager, bootstrap: str, group: str | None, record: JobRun,
                 client_conf: dict[str, str] | None = None) -> None:
        self.om, self.bootstrap, self.group, self.record = om, bootstrap, group, record
        self.client_conf = client_conf or {}

    def __call__(self, progress: Any) -> None:
        try:
            src = progress.sources[0] if progress.sources else None
            end = source_offsets(src.endOffset if src else None)
            latest = source_offsets(src.latestOffset if src else None) or end
            lag = backlog(end, latest)
            log.info("batch %d: %d rows, offsets %s, lag %d%s", progress.batchId, progress.numInputRows,
                     to_json(end), lag, observed_counts(progress.observedMetrics))
            if self.record.metrics is not None:
                dt = open_table(self.om.table_path)
                self.record.batch(int(progress.numInputRows), source_offsets(src.startOffset if src else None), end,
                                  lag, None if dt is None else dt.version())
        except Exception as e:  # noqa: BLE001 - reporting must never stop the job
            log.warning("batch %d: could not report progress: %s", progress.batchId, e)
        if self.group:
            try:
                self.om.mirror_to_group(self.bootstrap, self.group, client_conf=self.client_conf)
            except Exception as e:  # noqa: BLE001 - lag mirroring must never stop the job
                log.warning("could not mirror offsets to group %s: %s", self.group, e)


def run(cfg: JobConfig) -> int:
    with recorded(cfg, cfg.get("sink.app.id", cfg.name)) as record:
        return _stream(cfg, record)


def _stream(cfg: JobConfig, record: JobRun) -> int:
    table = cfg.table()
    app_id = record.app_id
    trigger = cfg.trigger()
    options = source_options(cfg)
    partition_by = cfg.list("sink.partition.by")
    check_value_settings(cfg)
    choice = sink_choice(cfg)
    base = _checkpoint_base(cfg, table, app_id)   # another job's checkpoint is refused before Spark starts
    spark = build_session(cfg, f"pylog stream_to_delta {app_id}", delta_spark=choice.delta_spark)
    probe = job_rows(cfg, spark.readStream.format("pylog").options(**options).load(), choice.merge)
    check_keys(cfg, choice, probe)
    add_raw_columns(cfg, table)
    plan = plan_generation(cfg, base, table, app_id, arrow_schema(table_columns(probe).schema), partition_by)
    record.begin()
    log.info("app %s generation %d, checkpoint %s, starting offsets %s", app_id, plan.generation, plan.checkpoint,
             plan.starting_offsets or "from the checkpoint")
    reader = spark.readStream.format("pylog").options(**options)
    if plan.starting_offsets:
        reader = reader.option("startingOffsets", plan.starting_offsets)
    if cfg.get("source.max.offsets.per.trigger"):
        reader = reader.option("maxOffsetsPerTrigger", cfg.require("source.max.offsets.per.trigger"))
    rows = observed(job_rows(cfg, reader.load(), choice.merge))
    merge_schema = cfg.bool("sink.merge.schema", False)
    if choice.delta_spark:
        writer = DeltaSparkStreamWriter(table, app_id, plan.generation, str(plan.checkpoint), choice, partition_by,
                                        merge_schema, record.run_id)
        query = (rows.writeStream.foreachBatch(writer).option("checkpointLocation", str(plan.checkpoint))
                 .trigger(**trigger).start())
    else:
        query = (rows.writeStream.format("pylog-delta")
                 .options(**writer_options(table, app_id, partition_by=partition_by, merge_schema=merge_schema,
                                           generation=plan.generation, checkpoint=str(plan.checkpoint),
                                           run_id=record.run_id))
                 .trigger(**trigger).start())
    return supervise(query, _ProgressLogger(OffsetManager(table, app_id), cfg.require("source.bootstrap.servers"),
                                             cfg.get("group.mirror"), record, source_client_conf(cfg)))
