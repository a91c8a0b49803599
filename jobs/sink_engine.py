"""Which engine writes a job's batches, and how: sink.engine, sink.mode and sink.merge.key.

delta-rs (the default) is the `pylog-delta` sink; delta-spark writes each batch through Spark's own
Delta engine (connectors.delta_spark_commit), storing the same txns, so a table written by one resumes
with the other. sink.mode=merge (delta-spark only) upserts by sink.merge.key and deletes the keys of
records with a null value. Settings are checked here, before any Spark work, and errors name them.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from connectors.delta_spark_commit import SparkBatch, commit_with_delta_spark
from connectors.table_location import TableRef
from connectors.keyed_merge import TOMBSTONE, latest_per_key
from connectors.spark_checkpoint import kafka_position
from jobs.config import JobConfig, JobConfigError

log = logging.getLogger("pylog.job.sink")

ENGINES = ("delta-rs", "delta-spark")
MODES = ("append", "merge")


@dataclass(frozen=True)
class SinkChoice:
    engine: str = "delta-rs"
    mode: Literal["append", "merge"] = "append"
    merge_keys: list[str] = field(default_factory=list)

    @property
    def delta_spark(self) -> bool:
        return self.engine == "delta-spark"

    @property
    def merge(self) -> bool:
        return self.mode == "merge"


def sink_choice(cfg: JobConfig) -> SinkChoice:
    """sink.engine, sink.mode and sink.merge.key, checked together; JobConfigError names the setting."""
    engine = cfg.get("sink.engine", "delta-rs")
    mode = cfg.get("sink.mode", "append")
    keys = cfg.list("sink.merge.key")
    if engine not in ENGINES:
        raise JobConfigError(f"job {cfg.name}: setting 'sink.engine' must be delta-rs or delta-spark, got {engine!r}")
    if mode not in MODES:
        raise JobConfigError(f"job {cfg.name}: setting 'sink.mode' must be append or merge, got {mode!r}")
    if mode == "merge" and engine != "delta-spark":
        raise JobConfigError(f"job {cfg.name}: sink.mode=merge needs sink.engine=delta-spark (the delta-rs engine "
                             "only appends); set sink.engine=delta-spark")
    if mode == "merge" and not keys:
        raise JobConfigError(f"job {cfg.name}: setting 'sink.merge.key' (the key column(s), e.g. key) is required "
                             "with sink.mode=merge")
    if keys and mode != "merge":
        raise JobConfigError(f"job {cfg.name}: setting 'sink.merge.key' is only used with sink.mode=merge, "
                             f"but sink.mode is {mode}")
    if engine == "delta-spark":
        check_s3_engine(cfg, "sink.engine=delta-spark")
    return SinkChoice(engine, "merge" if mode == "merge" else "append", keys)


def check_s3_engine(cfg: JobConfig, what: str) -> None:
    """delta-spark reaches s3:// tables through Hadoop's S3A (and commits with conditional writes, as delta-rs does
    by default): a job whose table is on S3 stops before Spark starts, in one line, when S3A is not installed."""
    from jobs.spark_session import hadoop_aws_jars, s3_tables

    tables = s3_tables(cfg)
    if tables:
        try:
            hadoop_aws_jars()
        except RuntimeError as e:
            raise JobConfigError(f"job {cfg.name}: {what} on {tables[0]}: {e}") from None


def check_keys(cfg: JobConfig, choice: SinkChoice, rows: Any) -> None:
    """The merge keys must be columns of the job's rows (a DataFrame); the error lists those columns."""
    missing = [k for k in choice.merge_keys if k not in rows.columns]
    if missing:
        columns = ", ".join(c for c in rows.columns if c != TOMBSTONE)
        raise JobConfigError(f"job {cfg.name}: setting 'sink.merge.key' names {', '.join(missing)}, not a column of "
                             f"the rows ({columns})")


def table_columns(rows: Any) -> Any:
    """The rows without the tombstone flag: what the table holds."""
    return rows.drop(TOMBSTONE) if TOMBSTONE in rows.columns else rows


def keyed_state(rows: Any, keys: list[str]) -> Any:
    """Each key's latest record, deleted keys left out: the table a merge of all `rows` would leave."""
    from pyspark.sql import functions as F

    return latest_per_key(rows, keys).where(~F.col(TOMBSTONE))


@dataclass
class DeltaSparkStreamWriter:
    """A stream's foreachBatch: each micro-batch in one delta-spark commit, with the batch's end offsets and
    topic ids read from the stream's checkpoint, as the pylog-delta sink does."""

    table: TableRef
    app_id: str
    generation: int
    checkpoint: str
    choice: SinkChoice
    partition_by: list[str] = field(default_factory=list)
    merge_schema: bool = False
    run_id: str | None = None

    def __call__(self, df: Any, batch_id: int) -> None:
        position = kafka_position(self.checkpoint, batch_id)
        commit_with_delta_spark(df.sparkSession, df, SparkBatch(
            self.table, self.app_id, batch_id, self.generation, position.offsets if position else None,
            position.topic_ids if position else {}, self.partition_by, self.merge_schema, self.choice.mode,
            self.choice.merge_keys, start_offsets=position.start if position else None, run_id=self.run_id))
