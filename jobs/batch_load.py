"""`pylog job batch_load`: a scheduled incremental load, made for cron.

Plans from one snapshot of the table: the app's committed offsets, topic ids and last batch write.
Reads every topic-partition from there up to the current end (fixed when the run starts), and
commits the data, the new end offsets and topic ids in one Delta commit as batch write `last + 1`
(batch writes have their own numbering, apart from any stream's generations, so a batch_load and a
stream_to_delta may take turns on one table and app id). The commit checks that the data starts where
the table's offsets end (connectors.contiguity), so a run that another writer of the app overtook
commits nothing and says so. A run with no new data is a no-op; a run after a crash re-reads from the
committed offsets; two overlapping runs plan the same batch id, so only one of them commits (the other
is a replay). A re-created topic, or offsets that aged out, fail the run when source.fail.on.data.loss
is true (the default); when it is false the run first stores the new log's start as the app's offsets
(connectors.delta_commit.declare_start) and reads from there. sink.engine=delta-spark makes the
same commit with delta-spark (jobs.sink_engine); sink.mode=merge upserts and deletes by sink.merge.key.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from pyspark.sql import Observation

from connectors.delta_commit import declare_start
from connectors.delta_sink import writer_options
from connectors.delta_spark_commit import SparkBatch, commit_with_delta_spark
from connectors.offset_manager import OffsetManager, live_log, resume_from
from jobs.config import JobConfig, JobConfigError
from jobs.progress import BatchProgress
from jobs.run_history import JobRun, recorded
from jobs.rows import (
    OBSERVATION,
    add_raw_columns,
    check_value_settings,
    job_rows,
    observed,
    observed_counts,
    source_client_conf,
    source_options,
)
from jobs.sink_engine import check_keys, sink_choice
from jobs.spark_session import build_session
from sparklog.offsets import PartitionOffsets, TopicIds, to_json
from sparklog.planner import backlog

log = logging.getLogger("pylog.job.batch_load")



@dataclass(frozen=True)
class LoadPlan:
    """What one run loads: [starts, ends) of each partition, as batch write `batch_id` of the app."""

    starts: PartitionOffsets
    ends: PartitionOffsets
    topic_ids: TopicIds
    batch_id: int
    new_table: bool

    @property
    def records(self) -> int:
        return backlog(self.starts, self.ends)


def plan_range(cfg: JobConfig, om: OffsetManager) -> LoadPlan:
    """This run's range, from one snapshot of the table."""
    default = cfg.get("source.starting.offsets", "earliest")
    if default not in ("earliest", "latest"):
        raise JobConfigError(f"job {cfg.name}: source.starting.offsets must be earliest or latest for batch_load, "
                             f"got {default!r}")
    state = om.state()
    live = live_log(source_options(cfg))
    fail_on_data_loss = cfg.bool("source.fail.on.data.loss", True)
    new: Literal["earliest", "latest"] = "earliest" if default == "earliest" else "latest"
    starts = resume_from(state, live, fail_on_data_loss=fail_on_data_loss, new=new)
    if any(tp in state.offsets and state.offsets[tp] != o for tp, o in starts.items()) or \
            (new == "latest" and state.table_version >= 0 and any(tp not in state.offsets for tp in starts)):
        # (with source.starting.offsets=latest, a partition the app never loaded starts at the end it has now:
        # stored, so that the next run loads what arrives after this one)
        # the log changed under stored offsets and failOnDataLoss=false lets the run go on from its new start:
        # store that start first, so the load's commit lines up with the table (connectors.contiguity)
        state = declare_start(om.table_path, om.app_id, topic_ids=live.topic_ids,
                              starts=lambda st: resume_from(st, live, fail_on_data_loss=fail_on_data_loss, new=new))
        starts = {tp: state.offsets.get(tp, o) for tp, o in starts.items()}
    batch_id = 0 if state.last_batch is None else state.last_batch + 1
    return LoadPlan(starts, live.latest, live.topic_ids, batch_id, new_table=state.table_version < 0)


def run(cfg: JobConfig) -> int:
    with recorded(cfg, cfg.get("sink.app.id", cfg.name)) as record:
        return _load(cfg, record)


def _load(cfg: JobConfig, record: JobRun) -> int:
    table = cfg.table()
    app_id = record.app_id
    om = OffsetManager(table, app_id)
    check_value_settings(cfg)
    choice = sink_choice(cfg)
    plan = plan_range(cfg, om)
    starts, ends, topic_ids, batch_id, records = plan.starts, plan.ends, plan.topic_ids, plan.batch_id, plan.records
    record.plan(starts, ends)
    if records == 0 and not plan.new_table:
        log.info("nothing new since the last load: offsets %s", to_json(ends))
        return 0
    if records == 0:
        # a first run with nothing to load still creates the table and stores where the log ends now, so the
        # next run loads what arrives after this one (with source.starting.offsets=latest it would otherwise
        # start from the end again each run and never load anything)
        log.info("nothing to load yet: creating %s at offsets %s", table, to_json(ends))
    else:
        log.info("loading %d records (batch %d) from %s to %s into %s", records, batch_id, to_json(starts),
                 to_json(ends), table)
    spark = build_session(cfg, f"pylog batch_load {app_id}", delta_spark=choice.delta_spark)
    progress = BatchProgress(spark, "loading", records)
    df = (spark.read.format("pylog").options(**source_options(cfg)).option("progressAddress", progress.address)
          .option("startingOffsets", to_json(starts)).option("endingOffsets", to_json(ends)).load())
    rows = job_rows(cfg, df, choice.merge)
    check_keys(cfg, choice, rows)
    add_raw_columns(cfg, table)
    observation = None if choice.delta_spark else Observation(OBSERVATION)   # a delta-spark commit reports none
    if observation is not None:
        rows = observed(rows, observation)
    partition_by, merge_schema = cfg.list("sink.partition.by"), cfg.bool("sink.merge.schema", False)
    with progress:
        if choice.delta_spark:
            commit_with_delta_spark(spark, rows, SparkBatch(table, app_id, batch_id, None, ends, dict(topic_ids),
                                                            partition_by, merge_schema, choice.mode, choice.merge_keys,
                                                            start_offsets=starts, run_id=record.run_id))
        else:
            rows.write.format("pylog-delta").mode("append").options(**writer_options(
                table, app_id, partition_by=partition_by, merge_schema=merge_schema, batch_id=batch_id, offsets=ends,
                start_offsets=starts, topic_ids=topic_ids, run_id=record.run_id)).save()
    log.info("loaded %d records up to offsets %s into %s%s", records, to_json(ends), table,
             observed_counts({OBSERVATION: observation.get} if observation is not None else None))
    if cfg.get("group.mirror"):
        try:
            om.mirror_to_group(cfg.require("source.bootstrap.servers"), cfg.require("group.mirror"),
                               client_conf=source_client_conf(cfg))
        except Exception as e:  # noqa: BLE001
            log.warning("could not mirror offsets to group %s: %s", cfg.get("group.mirror"), e)
    return 0
