"""The delta-spark engine of the sink (sink.engine=delta-spark): one batch, one delta-spark commit.

delta-spark's writer options take ONE txn (`txnAppId`/`txnVersion`), and its MERGE takes one only through
session settings (`spark.databricks.delta.write.txnAppId`/`txnVersion`, honoured by MERGE since Delta
2.x), but pylog keeps a batch's marker, generation, topic ids and one offset per partition as txn
actions (connectors.offset_txns.batch_txns). So this module drives delta-spark's own transaction
(DeltaLog.startTransaction, the API its commands are built on) and commits, in ONE Delta commit:
the data files it writes (`writeFiles`), the files it replaces (overwrite, merge) and every txn of
the batch (`updateSetTransaction`), with pylog's commit metadata as commitInfo tags. The tables read
back exactly as the delta-rs engine's (connectors.delta_commit): the same txns, the same AppState.

The exactly-once rule is delta_commit's, and contiguity (connectors.contiguity) is checked the same way:
the table's offsets for the batch's partitions are read with `txnVersion` inside the transaction.
The rule is checked inside the transaction: the marker and generation
are read with `txnVersion`, which makes them part of what the commit depends on, so a concurrent
commit of either (a replay by another writer, a generation claim) fails it with delta-spark's
conflict error, and the loop checks again on a fresh snapshot (skip, FencedError). A merge and an
overwrite read the whole table, so any concurrent change to the files they read (an OPTIMIZE beside
them) also makes them check again; an overwrite then fails with CommitConflictError when the table
moved past `read_version`. Files written by a failed attempt are left for VACUUM.

The table is created (and new columns added) by delta-rs through delta_commit.prepare_table, so both
engines write the same table layout. Runs on the Spark driver; needs a session with delta-spark.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from connectors import contiguity, faults
from connectors.delta_commit import MAX_COMMIT_ATTEMPTS, batch_name, commit_metadata, prepare_table
from connectors.errors import CommitConflictError, FencedError, SchemaMismatchError
from connectors.keyed_merge import (
    TOMBSTONE,
    file_name,
    latest_per_key,
    rewritten_rows,
    touched_files,
    with_file_names,
)
from connectors.errors import NotContiguousError
from connectors.table_location import TableLocation, TableRef
from connectors.offset_txns import batch_txns, generation_app_id, marker_app_id, offset_app_id
from sparklog.offsets import PartitionOffsets

log = logging.getLogger(__name__)

_CONFLICT = "org.apache.spark.sql.delta.DeltaConcurrentModificationException"


@dataclass
class SparkBatch:
    table_path: TableRef                  # pylog reads it with its store's options; Spark gets its URI (`uri`)
    app_id: str
    batch_id: int
    generation: int | None = 0            # None: a batch write (its own marker, no fence)
    end_offsets: PartitionOffsets | None = None
    topic_ids: dict[str, str] = field(default_factory=dict)
    partition_by: list[str] = field(default_factory=list)
    merge_schema: bool = False
    mode: Literal["append", "overwrite", "merge"] = "append"
    merge_keys: list[str] = field(default_factory=list)   # mode merge: the key columns
    read_version: int | None = None   # overwrite: the version whose files it replaces (None: the latest)
    start_offsets: PartitionOffsets | None = None   # required with end_offsets: what contiguity checks
    run_id: str | None = None   # the job run making the commit (jobs.run_history reads its commits back by it)

    @property
    def uri(self) -> str:
        """The table as Spark names it."""
        return TableLocation.of(self.table_path).uri


class _Jvm:
    """The few Scala values the transaction needs, built through Py4J."""

    def __init__(self, spark: Any) -> None:
        self.spark, self.jvm = spark, spark._jvm
        self.none = self.jvm.scala.Option.empty()

    def some(self, value: Any) -> Any:
        return self.jvm.scala.Option.apply(value)

    def seq(self, items: list[Any]) -> Any:
        out = self.jvm.java.util.ArrayList()
        for i in items:
            out.add(i)
        return self.jvm.scala.jdk.javaapi.CollectionConverters.asScala(out).toList()

    def items(self, seq: Any) -> list[Any]:
        return list(self.jvm.scala.jdk.javaapi.CollectionConverters.asJava(seq))

    def string_map(self, values: dict[str, str]) -> Any:
        m = getattr(getattr(self.jvm.scala.collection.immutable, "Map$"), "MODULE$").empty()
        for k, v in values.items():
            m = m.updated(k, v)
        return m

    def operation(self, b: SparkBatch, partition_by: list[str]) -> Any:
        """A WRITE in the table's history (delta-spark's MERGE operation wants the metrics its own command
        collects); a merge's predicate names its keys, and the tags say pylog.mode=merge."""
        ops = self.jvm.org.apache.spark.sql.delta
        mode = self.jvm.org.apache.spark.sql.SaveMode.valueOf("Overwrite" if b.mode == "overwrite" else "Append")
        predicate = self.some(f"pylog merge by key ({', '.join(b.merge_keys)})") if b.mode == "merge" else self.none
        return getattr(ops, "DeltaOperations$Write")(mode, self.some(self.seq(list(partition_by))), predicate,
                                                     self.none, self.none, self.none, self.none, self.none, self.none)

    def is_conflict(self, error: Exception) -> bool:
        """Whether `error` is delta-spark's DeltaConcurrentModificationException (another commit came first)."""
        cls = getattr(getattr(error, "java_exception", None), "getClass", lambda: None)()
        while cls is not None:
            if cls.getName() == _CONFLICT:
                return True
            cls = cls.getSuperclass()
        return False


def _table_columns(rows: Any) -> list[str]:
    return [c for c in rows.columns if c != TOMBSTONE]


def _arrow_schema(rows: Any) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(rows.select(*_table_columns(rows)).schema, timezone="UTC")


def _actions(j: _Jvm, txn: Any, rows: Any, b: SparkBatch, columns: list[str]) -> list[Any]:
    """The file actions of the batch in `txn`: files written, and files replaced (overwrite, merge)."""
    if b.mode == "append":
        return j.items(txn.writeFiles(rows.select(*columns)._jdf))
    files = j.items(txn.filterFiles())   # reads the whole table: concurrent changes to it conflict
    if b.mode == "overwrite":
        return [f.remove() for f in files] + j.items(txn.writeFiles(rows.select(*columns)._jdf))
    target = with_file_names(j.spark.read.format("delta").option("versionAsOf", txn.readVersion()).load(b.uri))
    touched = touched_files(target, rows, b.merge_keys)
    replaced = [f.remove() for f in files if file_name(f.path()) in touched]
    written = j.items(txn.writeFiles(rewritten_rows(target, rows, b.merge_keys, touched, columns)._jdf))
    log.info("Delta table %s: merge of batch %d rewrites %d of %d files", b.table_path, b.batch_id, len(replaced),
             len(files))
    return replaced + written


def _rows_added(actions: list[Any]) -> int | None:
    """The rows of the files the commit adds, from their statistics (None when a file has none)."""
    total = 0
    for a in actions:
        if a.getClass().getSimpleName() != "AddFile":
            continue
        stats = a.stats()
        if stats is None:
            return None
        total += int(json.loads(stats).get("numRecords", 0))
    return total


def _skip_reason(txn: Any, b: SparkBatch) -> str | None:
    """delta_commit's rule, read inside `txn` (so the commit depends on it): None to commit; raises to stop."""
    marker_id = marker_app_id(b.app_id, b.generation)
    marker = int(txn.txnVersion(marker_id))
    if marker >= 0 and marker >= b.batch_id:
        return f"marker {marker_id}={marker} >= batch {b.batch_id}"
    generation = int(txn.txnVersion(generation_app_id(b.app_id)))
    if b.generation is not None and generation > b.generation:
        raise FencedError(b.table_path, f"app {b.app_id} generation {b.generation} was superseded by generation "
                          f"{generation} (a reprocess replace, or another stream started with the same app id); "
                          f"batch {b.batch_id} was not committed. Restart the job: it resumes from the offsets "
                          "in the table.", int(txn.readVersion()))
    if b.mode == "overwrite" and b.read_version is not None and int(txn.readVersion()) > b.read_version:
        raise CommitConflictError(b.table_path, f"the overwrite by app {b.app_id} read version {b.read_version}, but "
                                  f"versions up to {txn.readVersion()} came after it; replacing now would delete those "
                                  "rows. Nothing was replaced: stop the other writers and run it again.",
                                  int(txn.readVersion()))
    return None


def _check_contiguous(txn: Any, b: SparkBatch) -> None:
    """connectors.contiguity's rule; the table's offsets of the batch's partitions are read inside `txn` (so the
    commit depends on them), the topic ids they were taken from by the log reader at the same version."""
    from connectors.delta_commit import app_state

    if b.mode == "overwrite" or b.start_offsets is None:
        return
    version = int(txn.readVersion())
    offsets = {}
    for tp in sorted(set(b.start_offsets) | set(b.end_offsets or {})):
        v = int(txn.txnVersion(offset_app_id(b.app_id, tp[0], tp[1])))
        if v >= 0:
            offsets[tp] = v
    ids = app_state(b.table_path, b.app_id, version).topic_ids if version >= 0 else {}
    contiguity.check(str(b.table_path), version, b.app_id, batch_name(b.batch_id, b.generation),
                     contiguity.Batch(b.start_offsets, b.end_offsets or {}, b.topic_ids),
                     contiguity.Stored(offsets, ids))


def _prepared_rows(rows: Any, b: SparkBatch) -> Any:
    if b.mode != "merge":
        return rows.drop(TOMBSTONE) if TOMBSTONE in rows.columns else rows
    missing = [k for k in b.merge_keys if k not in rows.columns]
    if not b.merge_keys or missing:
        raise SchemaMismatchError(b.table_path, f"merge keys {missing or '(none)'} are not columns of the rows "
                                  f"({', '.join(_table_columns(rows))})")
    if TOMBSTONE not in rows.columns:
        from pyspark.sql import functions as F

        rows = rows.withColumn(TOMBSTONE, F.lit(False))
    return latest_per_key(rows, b.merge_keys).persist()


def commit_with_delta_spark(spark: Any, rows: Any, b: SparkBatch) -> bool:
    """Write `rows` (a DataFrame) as batch `b` in one delta-spark commit. False when it was a replay.

    Raises FencedError, CommitConflictError, SchemaMismatchError or UnsupportedTableError (nothing committed).
    """
    if b.end_offsets and b.start_offsets is None:
        raise NotContiguousError(b.table_path, f"{batch_name(b.batch_id, b.generation)} of app {b.app_id} has end "
                                 "offsets but no start offsets, so it cannot be checked against the table's offsets; "
                                 "nothing was committed")
    schema = _arrow_schema(rows)
    partition_by = prepare_table(b.table_path, schema, b.partition_by, b.merge_schema)
    data = _prepared_rows(rows, b)
    columns = _table_columns(rows)
    j = _Jvm(spark)
    delta_log = j.jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, b.uri)
    tags = {"pylog.engine": "delta-spark", "pylog.mode": b.mode}
    if b.mode == "merge":
        tags["pylog.mergeKey"] = json.dumps(b.merge_keys)
    try:
        for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
            txn = delta_log.startTransaction(j.none, j.some(delta_log.update(False, j.none, j.none)))
            reason = _skip_reason(txn, b)
            if reason:
                log.info("Delta table %s: skipping replayed batch %d of %s: %s", b.table_path, b.batch_id, b.app_id,
                         reason)
                return False
            _check_contiguous(txn, b)
            actions = _actions(j, txn, data, b, columns)
            tags.update(commit_metadata(b.app_id, b.batch_id, b.generation, b.start_offsets, b.end_offsets, b.run_id,
                                        _rows_added(actions)))
            version = int(txn.readVersion()) + 1
            now = j.some(int(time.time() * 1000))
            for app, v in batch_txns(b.app_id, b.generation, b.batch_id, b.end_offsets, b.topic_ids, version).items():
                txn.updateSetTransaction(app, v, now)
            faults.before_delta_commit(b.batch_id)
            try:
                committed = int(txn.commit(j.seq(actions), j.operation(b, partition_by), j.string_map(tags)))
            except Exception as e:  # noqa: BLE001 - Py4J wraps delta-spark's conflict error
                if not j.is_conflict(e):
                    raise
                log.info("Delta table %s: another writer committed first (attempt %d): %s; checking again",
                         b.table_path, attempt, str(e).splitlines()[0][:300])
                continue
            log.info("Delta table %s: committed %s of %s (delta-spark %s) as version %d, offsets %s",
                     b.table_path, batch_name(b.batch_id, b.generation), b.app_id, b.mode, committed,
                     tags.get("pylog.offsets", "-"))
            faults.after_delta_commit(b.batch_id)
            return True
    finally:
        if data is not rows and b.mode == "merge":
            data.unpersist()
    raise CommitConflictError(b.table_path, f"batch {b.batch_id} of {b.app_id}: other writers kept committing "
                              f"first; gave up after {MAX_COMMIT_ATTEMPTS} attempts")
