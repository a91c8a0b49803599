"""`pylog job reprocess`: Hadoop-style offline reprocessing by rewinding offsets.

Rewinds to `reprocess.from` (earliest | timestamp:<epoch ms or ISO-8601> | offsets:<JSON> |
version:<table version>), reads up to the current end, and rebuilds the table in one atomic Delta commit: into `reprocess.target.path`
(a new table), or, with reprocess.mode=replace, replacing `sink.table.path`.

A replace first claims a new generation of the app in the table. That fences a `stream_to_delta`
writing the same table: its next commit fails with a message saying so, nothing it committed is
lost, and once restarted it resumes from the offsets of the rebuilt table. The replace then
commits against the version its claim made; if any other writer committed after it, the replace
fails with a conflict error and replaces nothing. Offsets given with `offsets:` follow Spark's rules:
every partition named, no unknown topic or partition, no offset beyond the log end. `version:V` starts
from the offsets sink.app.id had stored in sink.table.path as of its version V, which must still be
retained in the table's log (after Delta's log cleanup: a checkpoint at or before V and the commits
after it); they are checked against the live log as a resuming job's are, and partitions the app had
not seen yet start at their earliest offset. sink.engine=delta-spark makes the rebuild's one commit with
delta-spark; with sink.mode=merge the rebuilt table is the keyed state: each key's latest record, deleted
keys left out (jobs.sink_engine).
"""
from __future__ import annotations

import logging
from typing import Any

from kafka_protocol.timestamps import parse_instant_ms
from connectors import faults
from connectors.delta_commit import claim_generation
from connectors.table_location import TableLocation
from connectors.delta_sink import arrow_schema, writer_options
from connectors.delta_spark_commit import SparkBatch, commit_with_delta_spark
from connectors.offset_manager import LiveLog, OffsetManager, live_log, resume_from, rewind_offsets
from jobs.config import JobConfig, JobConfigError
from jobs.progress import BatchProgress
from jobs.run_history import JobRun, recorded
from jobs.rows import check_value_settings, job_rows, source_client_conf, source_options
from jobs.sink_engine import check_keys, keyed_state, sink_choice, table_columns
from jobs.spark_session import build_session
from sparklog.offsets import EARLIEST, PartitionOffsets, TopicPartition, format_tp, from_json, to_json
from sparklog.planner import backlog

log = logging.getLogger("pylog.job.reprocess")


def parse_from(cfg: JobConfig) -> tuple[str, Any]:
    v = cfg.get("reprocess.from", "earliest")
    if v == "earliest":
        return "earliest", None
    if v.startswith("timestamp:"):
        try:
            return "timestamp", parse_instant_ms(v[len("timestamp:"):])
        except ValueError as e:
            raise JobConfigError(f"job reprocess: reprocess.from: {e}") from None
    if v.startswith("version:"):
        try:
            version = int(v[len("version:"):])
        except ValueError:
            version = -1
        if version < 0:
            raise JobConfigError(f"job reprocess: reprocess.from version must be a table version (an integer >= 0), "
                                 f"got {v[len('version:'):]!r}")
        return "version", version
    if v.startswith("offsets:"):
        try:
            return "offsets", from_json(v[len("offsets:"):])
        except ValueError as e:
            raise JobConfigError(f"job reprocess: reprocess.from offsets must be JSON like {{\"t\":{{\"0\":5}}}}: {e}") from None
    raise JobConfigError(f"job reprocess: reprocess.from must be earliest, timestamp:<ms|ISO>, offsets:<JSON> or "
                         f"version:<table version>, got {v!r}")


def _fmt(tps: set[TopicPartition]) -> list[str]:
    return sorted(format_tp(tp) for tp in tps)


def strict_offsets(given: PartitionOffsets, live: LiveLog) -> PartitionOffsets:
    """Spark's rules for specific starting offsets, checked against the live log; -2 means earliest."""
    assigned = set(live.latest)
    named = set(given)
    if named - assigned:
        raise JobConfigError(f"job reprocess: reprocess.from names partitions that do not exist: {_fmt(named - assigned)}."
                             f" The topics have: {_fmt(assigned)}")
    if assigned - named:
        raise JobConfigError("job reprocess: if reprocess.from contains specific offsets, you must specify all "
                             f"TopicPartitions. Use -2 for earliest. Missing: {_fmt(assigned - named)}")
    out: PartitionOffsets = {}
    for (t, p) in sorted(named):
        o, low, high = given[(t, p)], live.earliest[(t, p)], live.latest[(t, p)]
        if o == EARLIEST:
            o = low
        elif o < 0:
            raise JobConfigError(f"job reprocess: offset {o} for {t}-{p} is not an offset (use -2 for earliest)")
        elif o > high:
            raise JobConfigError(f"job reprocess: the start offset {o} for {t}-{p} is greater than the end offset "
                                 f"{high} of its log")
        elif o < low:
            raise JobConfigError(f"job reprocess: the start offset {o} for {t}-{p} is below the log start {low}: "
                                 "those records are gone")
        out[(t, p)] = o
    return out


def version_offsets(cfg: JobConfig, table: TableLocation, app_id: str, version: int, live: LiveLog) -> PartitionOffsets:
    """The offsets `app_id` had stored in `table` as of `version`, checked against the live log."""
    state = OffsetManager(table, app_id).state(version)
    if not state.offsets:
        raise JobConfigError(f"job reprocess: app {app_id} had stored no offsets in {table} as of version {version}")
    log.info("app %s had stored offsets %s as of version %d of %s", app_id, to_json(state.offsets), version, table)
    return resume_from(state, live, fail_on_data_loss=cfg.bool("source.fail.on.data.loss", True), new="earliest")


def run(cfg: JobConfig) -> int:
    mode = cfg.get("reprocess.mode", "new-table")
    if mode not in ("new-table", "replace"):
        raise JobConfigError(f"job reprocess: reprocess.mode must be new-table or replace, got {mode!r}")
    with recorded(cfg, cfg.get("sink.app.id", cfg.name)) as record:
        return _rebuild(cfg, record, mode)


def _rebuild(cfg: JobConfig, record: JobRun, mode: str) -> int:
    bootstrap = cfg.require("source.bootstrap.servers")
    topics = cfg.list("source.topics")
    table = cfg.table()
    app_id = record.app_id
    target = table if mode == "replace" else cfg.table("reprocess.target.path")
    check_value_settings(cfg)
    kind, value = parse_from(cfg)
    live = live_log(source_options(cfg))
    ends = live.latest
    if kind == "offsets":
        starts = strict_offsets(value, live)
    elif kind == "version":
        starts = version_offsets(cfg, table, app_id, value, live)
    else:
        starts = rewind_offsets(bootstrap, topics, timestamp_ms=value, **source_client_conf(cfg)) if kind == "timestamp" else \
            {tp: live.earliest[tp] for tp in ends}
    records = backlog(starts, ends)
    record.plan(starts, ends)
    choice = sink_choice(cfg)
    spark = build_session(cfg, f"pylog reprocess {app_id}", delta_spark=choice.delta_spark)
    progress = BatchProgress(spark, "reprocessing", records)
    df = (spark.read.format("pylog").options(**source_options(cfg)).option("progressAddress", progress.address)
          .option("startingOffsets", to_json(starts)).option("endingOffsets", to_json(ends)).load())
    if kind == "timestamp":
        from pyspark.sql import functions as F

        df = df.where(F.col("timestamp") >= F.timestamp_millis(F.lit(value)))
    rows = job_rows(cfg, df, choice.merge)
    check_keys(cfg, choice, rows)
    if choice.merge:
        rows = keyed_state(rows, choice.merge_keys)
    partition_by = cfg.list("sink.partition.by")
    claim = claim_generation(target, app_id, arrow_schema(table_columns(rows).schema), partition_by,
                             starts=lambda _state: starts, topic_ids=live.topic_ids)
    faults.after_claim(0)
    log.info("reprocessing %d records of %s from %s to %s into %s (%s, generation %s, table version %d)", records,
             ",".join(topics), to_json(starts), to_json(ends), target, mode, claim.generation, claim.table_version)
    with progress:
        if choice.delta_spark:
            commit_with_delta_spark(spark, rows, SparkBatch(
                target, app_id, 0, claim.generation or 0, ends, dict(live.topic_ids), partition_by, True, "overwrite",
                read_version=claim.table_version, start_offsets=starts, run_id=record.run_id))
        else:
            rows.write.format("pylog-delta").mode("overwrite").options(**writer_options(
                target, app_id, partition_by=partition_by, merge_schema=True, generation=claim.generation, batch_id=0,
                read_version=claim.table_version, offsets=ends, start_offsets=starts, topic_ids=live.topic_ids,
                run_id=record.run_id)).save()
    log.info("rebuilt %s up to offsets %s", target, to_json(ends))
    return 0
