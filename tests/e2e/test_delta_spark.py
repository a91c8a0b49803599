"""pylog's Delta tables and delta-spark, Spark's own Delta engine, on real tables (issue 13, first part).

- A table written by pylog-delta is read by delta-spark with the same rows, appended to, OPTIMIZEd,
  VACUUMed (RETAIN 0 HOURS), checkpointed, and its commits before the checkpoint are deleted by
  delta-spark's own log cleanup; the offsets and batch markers every app keeps in txn actions are all
  still there, and resumed `batch_load` and `stream_to_delta` runs neither duplicate nor lose a record.
- delta-spark honours pylog's markers: a write with txnAppId/txnVersion equal to what pylog stored is
  skipped.
- Tables created by delta-spark as pylog-delta targets: plain, partitioned, with deletion vectors and
  with V2 checkpoints work; column mapping and the other features the sink cannot write correctly fail
  with UnsupportedTableError naming the table and the feature, before anything is committed.
- Every checkpoint kind delta-spark writes (classic, multi-part, V2) keeps the offsets readable after
  log cleanup (before pylog read V2 checkpoints, a V2 checkpoint made every app's state read as empty),
  and `pylog job reprocess --set reprocess.from=version:V` reads a retained version's.
- `pylog job maintain` compacts, vacuums and checkpoints a table and reports every app's offsets unchanged.
- The delta-spark engine (sink.engine=delta-spark) stores the same txns as delta-rs, so either engine resumes
  and skips the other's batches; its keyed merge keeps each key's latest record, deletes tombstoned keys and
  skips a replayed batch.

The module shares the run's one SparkSession (tests/e2e/conftest.py builds it with
jobs.spark_session.with_delta_spark) and one pylog broker. Log cleanup deletes only commit files older
than delta.logRetentionDuration (counted from midnight), and only up to a checkpoint at the first version
it keeps, so the tests age every log file by hand and let delta-spark's own cleanup delete them after a
new checkpoint.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from pylog.launch.process import BrokerProcess
from connectors.delta_commit import BatchCommit, app_state, claim_generation, commit_batch
from connectors.delta_log_reader import read_app_transactions
from connectors.delta_sink import DeltaSinkDataSource, writer_options
from connectors.errors import TableLogError, UnsupportedTableError
from connectors.offset_manager import OffsetManager, end_offsets
from connectors.offset_txns import AppState
from connectors.parquet_files import write_files
from jobs.spark_session import has_delta_spark
from sparklog.offsets import to_json
from tests.support.clients import create_topic
from tests.support.jobs import finish, produce_events, run_job

pytestmark = [pytest.mark.timeout(600)]

# Runtime settings of Spark's Delta engine for small local tables (restored when the module ends):
# without them a VACUUM lists files in 10000 tasks and every snapshot is rebuilt in 50 partitions.
SESSION_CONF = {
    "spark.databricks.delta.retentionDurationCheck.enabled": "false",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
}
ROWS_DDL = "topic string, partition int, offset long, value string"


@pytest.fixture(scope="module")
def delta(spark: Any) -> Iterator[Any]:
    assert has_delta_spark(spark), "tests/e2e/conftest.py must build the session with with_delta_spark"
    before = {k: spark.conf.get(k, None) for k in SESSION_CONF}
    for k, v in SESSION_CONF.items():
        spark.conf.set(k, v)
    spark.dataSource.register(DeltaSinkDataSource)
    yield spark
    for k, v in before.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("delta-spark-broker") / "data")
    b.start()
    yield b
    b.close()


# ---- delta-spark maintenance, as a user runs it --------------------------------------------------------------

def _jvm_delta_log(spark: Any, path: Path) -> Any:
    return spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(path))


def checkpoint(spark: Any, path: Path) -> int:
    """A delta-spark checkpoint of the table's latest version (the cached snapshot refreshed first: pylog's
    commits are made by delta-rs, which delta-spark's cache has not seen); returns the version."""
    none = spark._jvm.scala.Option.empty()
    log = _jvm_delta_log(spark, path)
    snapshot = log.update(False, none, none)
    log.checkpoint(snapshot, none)
    return int(snapshot.version())


def clean_up_log(spark: Any, path: Path) -> int:
    """Delete the commits before a new checkpoint with delta-spark's own log cleanup; returns its version.

    Cleanup removes what is older than delta.logRetentionDuration, counted from midnight, so the log's
    files are first aged by three days; the ALTER commit then checkpoints (interval 1) and cleans up.
    """
    old = time.time() - 3 * 86400
    for f in (path / "_delta_log").iterdir():
        if f.is_file():
            os.utime(f, (old, old))
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '1', "
              "'delta.logRetentionDuration' = 'interval 1 hours', "
              "'delta.deletedFileRetentionDuration' = 'interval 1 hours')").collect()
    version = int(spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]["version"])
    commits = sorted(int(f.name[:20]) for f in (path / "_delta_log").glob("*.json") if f.name[:20].isdigit()
                     and f.name[20:] == ".json")
    assert commits[0] == version, f"log cleanup left commits {commits} before checkpoint {version}"
    return version


def maintain_with_delta_spark(spark: Any, path: Path, manual_rows: int = 0) -> None:
    """What a delta-spark user runs on a table: an append, OPTIMIZE, VACUUM RETAIN 0 HOURS, a checkpoint
    and the log cleanup that deletes the commits before it."""
    if manual_rows:
        (spark.createDataFrame([("manual", 0, i, None) for i in range(manual_rows)], ROWS_DDL)
         .select(*_table_columns(spark, path)).write.format("delta").mode("append").save(str(path)))
    optimized = spark.sql(f"OPTIMIZE delta.`{path}`").collect()[0]["metrics"]
    assert optimized["numFilesRemoved"] >= 1
    spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS").collect()
    live = {f.split("/")[-1] for f in spark.read.format("delta").load(str(path)).inputFiles()}
    on_disk = {f.name for f in path.rglob("*.parquet") if not {"_delta_log", "_pylog_runs"} & set(f.parts)}
    assert on_disk == live, "VACUUM left only the files of the current version"
    checkpoint(spark, path)
    clean_up_log(spark, path)


def _table_columns(spark: Any, path: Path) -> list[Any]:
    """Columns to select so that a (topic, partition, offset, value) frame fits the table's schema: the
    others null, or the current time where the table says NOT NULL (the jobs' ingested_at)."""
    from pyspark.sql import functions as F

    schema = spark.read.format("delta").load(str(path)).schema
    base = {"topic", "partition", "offset", "value"}
    return [F.col(f.name).cast(f.dataType) if f.name in base
            else (F.lit(None) if f.nullable else F.current_timestamp()).cast(f.dataType).alias(f.name)
            for f in schema.fields]


def _same_state(a: AppState, b: AppState) -> bool:
    return (a.offsets, a.topic_ids, a.generation, a.last_batch) == (b.offsets, b.topic_ids, b.generation, b.last_batch)


def _keys(spark: Any, path: Path, topic: str | None = None) -> list[tuple[str, int, int]]:
    df = spark.read.format("delta").load(str(path))
    if topic:
        df = df.where(df.topic == topic)
    return sorted((r.topic, r.partition, r.offset) for r in df.select("topic", "partition", "offset").collect())


# ---- pylog-delta writes without a broker (the sink as batch jobs use it) --------------------------------------

def _rows(spark: Any, start: int, count: int, topic: str = "t") -> Any:
    return spark.createDataFrame([(topic, 0, i, f"v{i}") for i in range(start, start + count)], ROWS_DDL)


def sink_write(spark: Any, path: Path, app_id: str, batch_id: int, start: int, count: int, **opts: Any) -> None:
    """Rows with offsets [start, start + count) of t-0 through `df.write.format("pylog-delta")`, as one batch."""
    options = writer_options(str(path), app_id, batch_id=batch_id, offsets={("t", 0): start + count},
                             start_offsets={("t", 0): start}, **opts)
    _rows(spark, start, count).write.format("pylog-delta").mode("append").options(**options).save()


SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("value", pa.string())])


def commit_rows(path: Path, app_id: str, batch_id: int, start: int, count: int, **kw: Any) -> bool:
    """The same batch through the connectors' API, without Spark (for tests about the log only)."""
    rb = pa.RecordBatch.from_pydict({"topic": ["t"] * count, "partition": [0] * count,
                                     "offset": list(range(start, start + count)),
                                     "value": [f"v{i}" for i in range(start, start + count)]}, schema=SCHEMA)
    files = [f.to_dict() for f in write_files(str(path), [rb], [])]
    return commit_batch(BatchCommit(str(path), app_id, batch_id, files, SCHEMA, end_offsets={("t", 0): start + count},
                                    start_offsets={("t", 0): start}, **kw))


# ---- b. delta-spark honours pylog's markers -------------------------------------------------------------------

def test_delta_spark_skips_a_write_carrying_the_txn_pylog_stored(delta, tmp_path):
    table = tmp_path / "orders"
    sink_write(delta, table, "orders", 0, 0, 10)
    sink_write(delta, table, "orders", 1, 10, 10)
    version = DeltaTable(str(table)).version()
    for txn_version in (1, 0):   # the batch pylog stored last, and an older one (batch writes' marker)
        (_rows(delta, 100, 5).write.format("delta").mode("append")
         .option("txnAppId", "orders#batch").option("txnVersion", txn_version).save(str(table)))
    assert DeltaTable(str(table)).version() == version, "both delta-spark writes were skipped"
    assert _keys(delta, table) == [("t", 0, i) for i in range(20)]

    # a stream's generation has its own marker: `<app id>` for generation 0, `<app id>#<generation>` after
    for generation in (0, 1):
        claim = claim_generation(str(table), "orders", SCHEMA)
        assert claim.generation == generation and claim.offsets == {("t", 0): 20 + 5 * generation}
        sink_write(delta, table, "orders", 0, 20 + 5 * generation, 5, generation=generation)
        version = DeltaTable(str(table)).version()
        (_rows(delta, 200, 5).write.format("delta").mode("append")
         .option("txnAppId", "orders" if generation == 0 else "orders#1").option("txnVersion", 0).save(str(table)))
        assert DeltaTable(str(table)).version() == version
    assert _keys(delta, table) == [("t", 0, i) for i in range(30)]
    state = app_state(str(table), "orders")
    assert state.offsets == {("t", 0): 30} and state.generation == 1 and state.last_batch == 1


# ---- c. tables created by delta-spark as pylog-delta targets -------------------------------------------------

TARGETS = {
    "plain": "",
    "partitioned": "PARTITIONED BY (partition)",
    "deletion-vectors": "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
    "v2-checkpoints": "TBLPROPERTIES ('delta.checkpointPolicy' = 'v2')",
    "column-mapping": "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')",
}


@pytest.mark.parametrize("kind", list(TARGETS))
def test_a_table_created_by_delta_spark_is_a_pylog_delta_target_or_a_clear_error(delta, tmp_path, kind):
    table = tmp_path / kind
    delta.sql(f"CREATE TABLE delta.`{table}` ({ROWS_DDL}) USING delta {TARGETS[kind]}").collect()
    _rows(delta, 0, 5, topic="pre").write.format("delta").mode("append").save(str(table))
    if kind == "deletion-vectors":
        delta.sql(f"DELETE FROM delta.`{table}` WHERE offset IN (1, 3)").collect()
        metrics = DeltaTable(str(table)).history(1)[0]["operationMetrics"]
        assert int(metrics["numDeletionVectorsAdded"]) >= 1, "the DELETE wrote deletion vectors"
    version = DeltaTable(str(table)).version()
    files = set(table.rglob("*.parquet"))
    pre = _keys(delta, table)

    if kind == "column-mapping":
        with pytest.raises(Exception) as failed:
            sink_write(delta, table, "app", 0, 0, 10)
        message = str(failed.value)
        assert "UnsupportedTableError" in message and str(table) in message
        assert "column mapping (delta.columnMapping.mode=name)" in message
        assert DeltaTable(str(table)).version() == version, "nothing was committed"
        assert set(table.rglob("*.parquet")) == files, "no file was written"
        return

    sink_write(delta, table, "app", 0, 0, 10)
    sink_write(delta, table, "app", 1, 10, 10)
    sink_write(delta, table, "app", 1, 10, 10)   # a replay: skipped
    assert _keys(delta, table) == sorted(pre + [("t", 0, i) for i in range(20)])
    state = app_state(str(table), "app")
    assert state.offsets == {("t", 0): 20} and state.last_batch == 1
    if kind == "partitioned":   # the sink took the table's own partitioning (partitionBy was not set)
        parts = pa.table(DeltaTable(str(table)).get_add_actions(flatten=True)).to_pydict()
        assert set(parts["partition.partition"]) == {0}
        assert all("partition=0/" in p for p in parts["path"])


@pytest.mark.parametrize("kind, create, feature", [
    ("generated", f"({ROWS_DDL}, off2 long GENERATED ALWAYS AS (offset * 2)) USING delta", "generated columns (off2)"),
    ("identity", f"(id BIGINT GENERATED ALWAYS AS IDENTITY, {ROWS_DDL}) USING delta", "identity columns (id)"),
    ("check", f"({ROWS_DDL}) USING delta", "CHECK constraints (small)"),
    ("txn-retention", f"({ROWS_DDL}) USING delta TBLPROPERTIES ('delta.setTransactionRetentionDuration' = "
                      "'interval 1 days')", "delta.setTransactionRetentionDuration=interval 1 days"),
    ("row-tracking", f"({ROWS_DDL}) USING delta TBLPROPERTIES ('delta.enableRowTracking' = 'true')", "RowTracking"),
])
def test_a_feature_the_sink_cannot_write_is_refused_naming_the_table(delta, tmp_path, kind, create, feature):
    table = tmp_path / kind
    delta.sql(f"CREATE TABLE delta.`{table}` {create}").collect()
    if kind == "check":
        delta.sql(f"ALTER TABLE delta.`{table}` ADD CONSTRAINT small CHECK (offset < 3)").collect()
    version = DeltaTable(str(table)).version()
    with pytest.raises(UnsupportedTableError) as failed:
        commit_rows(table, "app", 0, 0, 5)
    assert str(table) in str(failed.value) and feature in str(failed.value)
    assert DeltaTable(str(table)).version() == version
    assert not list(table.rglob("*.parquet")), "the batch's files were removed"


# ---- every checkpoint kind keeps the offsets readable after log cleanup ---------------------------------------

@pytest.mark.parametrize("kind", ["classic", "multi-part", "v2"])
def test_offsets_survive_every_checkpoint_kind_and_log_cleanup(delta, tmp_path, kind):
    table = tmp_path / kind
    props = "TBLPROPERTIES ('delta.checkpointPolicy' = 'v2')" if kind == "v2" else ""
    delta.sql(f"CREATE TABLE delta.`{table}` ({ROWS_DDL}) USING delta {props}").collect()
    for b in range(3):
        commit_rows(table, "a", b, b * 10, 10)
    commit_rows(table, "b", 0, 0, 5)
    before = {app: app_state(str(table), app) for app in ("a", "b")}
    if kind == "multi-part":
        delta.conf.set("spark.databricks.delta.checkpoint.partSize", "1")
    try:
        cp = checkpoint(delta, table)
    finally:
        delta.conf.unset("spark.databricks.delta.checkpoint.partSize")
    names = [f.name for f in (table / "_delta_log").iterdir()]
    expected = {"classic": f"{cp:020d}.checkpoint.parquet", "multi-part": f"{cp:020d}.checkpoint.0000000001.",
                "v2": f"{cp:020d}.checkpoint."}[kind]
    assert any(n.startswith(expected) for n in names), names
    cleaned = clean_up_log(delta, table)
    for app in ("a", "b"):
        assert _same_state(app_state(str(table), app), before[app]), app
        assert DeltaTable(str(table)).transaction_version(app) == before[app].last_batch
    assert OffsetManager(str(table), "a").apps() == ["a", "b"]
    # a retained version can be read as of, one before the checkpoint cannot
    assert app_state(str(table), "a", cleaned).offsets == {("t", 0): 30}
    with pytest.raises(TableLogError, match=rf"version 1 is not retained.*versions \d+ to {cleaned} are retained"):
        read_app_transactions(table, 1)
    # and pylog goes on writing on top of delta-spark's checkpoint
    assert commit_rows(table, "a", 3, 30, 10)
    assert not commit_rows(table, "a", 3, 30, 10)
    assert app_state(str(table), "a").offsets == {("t", 0): 40}
    assert len(_keys(delta, table)) == 45


# ---- a. a pylog table maintained by delta-spark: every app resumes exactly once -------------------------------

VALUE_SCHEMA = "event_id string, user_id string, type string, amount double, ts long"


def _ids(spark: Any, path: Path, topic: str) -> list[int]:
    rows = spark.read.format("delta").load(str(path)).where(f"topic = '{topic}'").select("event_id").collect()
    return sorted(int(r.event_id) for r in rows)


def _exactly_once(spark: Any, path: Path, bootstrap: str, topic: str, app_id: str, produced: int) -> None:
    keys = _keys(spark, path, topic)
    assert len(keys) == len(set(keys)), f"{topic}: {len(keys) - len(set(keys))} duplicated records"
    ends = end_offsets(bootstrap, [topic])
    assert set(keys) == {(topic, p, o) for (_, p), end in ends.items() for o in range(end)}, topic
    assert _ids(spark, path, topic) == list(range(produced)), f"{topic}: every event id once"
    assert OffsetManager(str(path), app_id).committed() == ends


def _load(spark: Any, bootstrap: str, topic: str, path: Path, app_id: str) -> None:
    """What `pylog job batch_load` does, in this process: the topic from the app's stored offsets to its
    end, in one pylog-delta commit with the end offsets and topic ids."""
    from connectors.offset_manager import live_log, resume_from
    from jobs.rows import table_rows
    from sparklog.offsets import to_json

    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "failOnDataLoss": "true"}
    state = app_state(str(path), app_id)
    live = live_log(options)
    starts = resume_from(state, live, fail_on_data_loss=True)
    df = (spark.read.format("pylog").options(**options).option("startingOffsets", to_json(starts))
          .option("endingOffsets", to_json(live.latest)).load())
    batch = 0 if state.last_batch is None else state.last_batch + 1
    (table_rows(df, VALUE_SCHEMA).write.format("pylog-delta").mode("append")
     .options(**writer_options(str(path), app_id, batch_id=batch, offsets=live.latest, start_offsets=starts,
                               topic_ids=live.topic_ids))
     .save())


def test_jobs_resume_exactly_once_after_delta_spark_maintains_their_table(delta, broker, tmp_path):
    bootstrap = broker.bootstrap
    table = tmp_path / "events"
    for topic in ("cron-src", "stream-src"):
        create_topic(bootstrap, topic, partitions=2)
        produce_events(bootstrap, topic, 0, 500)
    common = {"source.bootstrap.servers": bootstrap, "sink.table.path": table, "value.schema": VALUE_SCHEMA,
              "group.mirror": ""}
    cron = {**common, "source.topics": "cron-src", "sink.app.id": "cron"}
    stream = {**common, "source.topics": "stream-src", "sink.app.id": "stream", "trigger": "available-now",
              "sink.checkpoint.location": tmp_path / "ckpt", "source.max.offsets.per.trigger": 200}
    _load(delta, bootstrap, "cron-src", table, "cron")   # batch_load's first run, in this process
    # killed right after the Delta commit of batch 1, before Spark's own commit of it: its restart replays batch 1
    killed = run_job("stream_to_delta", stream, env={"PYLOG_FAULT_KILL_AFTER_DELTA_COMMIT": "1"})
    killed.communicate(timeout=240)
    assert killed.returncode == -9
    assert _keys(delta, table) == sorted(
        zip(*(DeltaTable(str(table)).to_pyarrow_table(columns=["topic", "partition", "offset"]).column(c).to_pylist()
              for c in ("topic", "partition", "offset")))), "delta-spark reads the rows delta-rs reads"
    before = {app: app_state(str(table), app) for app in ("cron", "stream")}
    assert before["cron"].offsets and before["stream"].last_batch == 1

    maintain_with_delta_spark(delta, table, manual_rows=3)
    assert not (table / "_delta_log" / f"{0:020d}.json").exists()
    for app in ("cron", "stream"):
        assert _same_state(app_state(str(table), app), before[app]), f"{app}'s offsets and markers survived"
    assert OffsetManager(str(table), "cron").apps() == ["cron", "stream"]

    for topic in ("cron-src", "stream-src"):
        produce_events(bootstrap, topic, 500, 300)
    # both as `pylog job` processes; the stream resumes from its checkpoint and replays batch 1 (skipped)
    runs = [run_job("batch_load", cron), run_job("stream_to_delta", stream)]
    for proc in runs:
        finish(proc)
    _exactly_once(delta, table, bootstrap, "cron-src", "cron", 800)
    _exactly_once(delta, table, bootstrap, "stream-src", "stream", 800)

    assert _keys(delta, table, "manual") == [("manual", 0, i) for i in range(3)], "delta-spark's own rows stay"


def test_batch_load_and_a_merging_reprocess_commit_on_the_delta_spark_engine_exactly_once(delta, broker, tmp_path):
    """The batch jobs with sink.engine=delta-spark, in this process as `pylog job` runs them: a load, a
    resumed load, a load with nothing new (no commit), then a reprocess into a new table merged by key,
    where a later record of a key wins and a tombstone deletes its key."""
    from confluent_kafka import Producer

    from jobs import batch_load, reprocess
    from jobs.config import JobConfig

    bootstrap, topic = broker.bootstrap, "ds-batch"
    table, keyed = tmp_path / "loaded", tmp_path / "keyed"
    create_topic(bootstrap, topic, partitions=2)
    produce_events(bootstrap, topic, 0, 300)
    common = [f"source.bootstrap.servers={bootstrap}", f"source.topics={topic}", f"value.schema={VALUE_SCHEMA}",
              "group.mirror=", "sink.engine=delta-spark", f"sink.table.path={table}", "sink.app.id=cron"]
    assert batch_load.run(JobConfig.load("batch_load", None, common)) == 0
    produce_events(bootstrap, topic, 300, 200)
    assert batch_load.run(JobConfig.load("batch_load", None, common)) == 0
    version = DeltaTable(str(table)).version()
    assert batch_load.run(JobConfig.load("batch_load", None, common)) == 0
    assert DeltaTable(str(table)).version() == version, "nothing new: no commit"
    _exactly_once(delta, table, bootstrap, topic, "cron", 500)
    writes = [h for h in DeltaTable(str(table)).history() if h.get("operation") == "WRITE"]
    assert len(writes) == 2 and all("Delta-Lake" in str(h.get("engineInfo")) for h in writes), writes

    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, key=b"k1", value=json.dumps({"event_id": "1001", "user_id": "u", "type": "t", "amount": None,
                                                  "ts": 1001}).encode(), partition=0)
    p.produce(topic, key=b"k2", value=None, partition=0)
    assert p.flush(10) == 0
    merge = common + ["sink.mode=merge", "sink.merge.key=key", "reprocess.mode=new-table",
                      f"reprocess.target.path={keyed}"]
    assert reprocess.run(JobConfig.load("reprocess", None, merge)) == 0
    rows = {r.key: r.event_id for r in delta.read.format("delta").load(str(keyed)).select("key", "event_id").collect()}
    assert len(rows) == 499 and "k2" not in rows and rows["k1"] == "1001"
    assert rows == {f"k{i}": str(i) for i in range(500) if i not in (1, 2)} | {"k1": "1001"}


# ---- 3. reprocess from a retained version's offsets after maintenance -------------------------------------------

def test_reprocess_reads_the_offsets_of_a_retained_version_after_maintenance(delta, broker, tmp_path):
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "rp-src", partitions=2)
    table = tmp_path / "loaded"
    for start in (0, 300):      # two loads, so maintenance has files to compact (a small read is one task)
        produce_events(bootstrap, "rp-src", start, 300)
        _load(delta, bootstrap, "rp-src", table, "loader")
    maintain_with_delta_spark(delta, table)
    retained = DeltaTable(str(table)).version()
    at_retained = app_state(str(table), "loader", retained).offsets
    assert sum(at_retained.values()) == 600
    produce_events(bootstrap, "rp-src", 600, 400)
    _load(delta, bootstrap, "rp-src", table, "loader")
    assert sum(app_state(str(table), "loader").offsets.values()) == 1000

    settings = {"source.bootstrap.servers": bootstrap, "source.topics": "rp-src", "sink.table.path": table,
                "sink.app.id": "loader", "value.schema": VALUE_SCHEMA, "reprocess.mode": "new-table"}
    rebuilt = tmp_path / "rebuilt"
    finish(run_job("reprocess", {**settings, "reprocess.from": f"version:{retained}", "reprocess.target.path": rebuilt}))
    assert _ids(delta, rebuilt, "rp-src") == list(range(600, 1000)), "exactly the records after that version"
    assert sum(app_state(str(rebuilt), "loader").offsets.values()) == 1000

    gone = run_job("reprocess", {**settings, "reprocess.from": "version:1", "reprocess.target.path": tmp_path / "x"})
    out, _ = gone.communicate(timeout=240)
    assert gone.returncode == 1, out
    assert f"version 1 is not retained in its log (versions {retained} to" in out and str(table) in out
    assert not (tmp_path / "x").exists(), "nothing was written"


# ---- 5. `pylog job maintain` ---------------------------------------------------------------------------------

def test_maintain_job_compacts_vacuums_checkpoints_and_reports_unchanged_offsets(delta, broker, tmp_path):
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "mt-src", partitions=2)
    produce_events(bootstrap, "mt-src", 0, 300)
    table = tmp_path / "kept"
    _load(delta, bootstrap, "mt-src", table, "one")
    produce_events(bootstrap, "mt-src", 300, 200)
    _load(delta, bootstrap, "mt-src", table, "one")
    _load(delta, bootstrap, "mt-src", table, "two")
    before = {app: app_state(str(table), app) for app in ("one", "two")}
    rows = len(_keys(delta, table))
    files_before = len(DeltaTable(str(table)).file_uris())

    report_path = tmp_path / "report.json"
    out = finish(run_job("maintain", {"sink.table.path": table, "maintain.vacuum.retention.hours": 0,
                                      "spark.databricks.delta.retentionDurationCheck.enabled": "false",
                                      "maintain.report.path": report_path}))
    report = json.loads(report_path.read_text())
    assert report["before"]["files"] == files_before >= 3 and report["after"]["files"] == 1
    assert report["steps"]["optimize"]["files_removed"] == files_before
    assert report["steps"]["checkpoint"] == {"version": report["after"]["version"], "log_cleanup": True}
    assert report["problems"] == []
    for app in ("one", "two"):
        assert report["apps"][app]["offsets"] == to_json(before[app].offsets)
        assert _same_state(app_state(str(table), app), before[app]), f"{app}'s offsets and markers are unchanged"
        assert f"app {app}: offsets {to_json(before[app].offsets)}" in out
    cp = report["after"]["version"]
    assert (table / "_delta_log" / f"{cp:020d}.checkpoint.parquet").exists()
    assert len(_keys(delta, table)) == rows
    on_disk = {f.name for f in table.rglob("*.parquet") if not {"_delta_log", "_pylog_runs"} & set(f.parts)}
    assert len(on_disk) == 1, "VACUUM RETAIN 0 HOURS left only the compacted file"
    from jobs.run_history import read_runs          # the runs recorded beside the table survive its VACUUM
    runs = read_runs(str(table), last=50)
    assert runs[0].job == "maintain" and runs[0].outcome == "done", runs[0]
    assert len(runs) == 1 and runs[0].ended is not None   # its started row, written before the VACUUM, is there


def test_maintain_vacuum_keeps_the_retention_asked_for_or_the_tables_own(delta, tmp_path):
    """delta-spark 4 ignores a RETAIN other than 0 hours by default (a warning in Spark's log only);
    maintain honours its setting, and without one applies the table's delta.deletedFileRetentionDuration."""
    from deltalake import write_deltalake

    from jobs import maintain

    path = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(path), pa.table({"a": [i]}), mode="append",
                        configuration={"delta.deletedFileRetentionDuration": "interval 0 hours"})
    write_deltalake(str(path), pa.table({"a": [9]}), mode="overwrite")   # three files no longer referenced
    on_disk = lambda: len([f for f in path.glob("*.parquet")])   # noqa: E731
    assert on_disk() == 4
    assert maintain.vacuum(delta, str(path), 1) == "1 hours (maintain.vacuum.retention.hours)"
    assert on_disk() == 4, "RETAIN 1 HOURS kept the files removed a moment ago"
    applied = maintain.vacuum(delta, str(path), None)
    assert "delta.deletedFileRetentionDuration (interval 0 hours)" in applied, applied
    assert on_disk() == 1, "the table's retention of 0 hours deleted them"


# ---- 4. delta-spark as the sink's engine: the same offsets model, and keyed merges --------------------------

KEYED_DDL = "topic string, partition int, offset long, key string, value string, _pylog_tombstone boolean"


def _keyed(spark: Any, records: list[tuple[int, str, str | None]]) -> Any:
    """t-0 records (offset, key, value; None: a tombstone) as the jobs' rows with the tombstone flag."""
    return spark.createDataFrame([("t", 0, o, k, v, v is None) for o, k, v in records], KEYED_DDL)


def test_the_delta_spark_engine_stores_the_same_offsets_and_either_engine_resumes_the_other(delta, tmp_path):
    from connectors.delta_spark_commit import SparkBatch, commit_with_delta_spark
    from connectors.errors import FencedError

    table = tmp_path / "mixed"
    assert commit_rows(table, "app", 0, 0, 10, topic_ids={"t": "id-1"})                        # delta-rs
    state_rs = app_state(str(table), "app")
    assert commit_with_delta_spark(delta, _rows(delta, 10, 10), SparkBatch(                     # delta-spark
        str(table), "app", 1, end_offsets={("t", 0): 20}, topic_ids={"t": "id-1"}, start_offsets={("t", 0): 10}))
    state = app_state(str(table), "app")
    assert (state.offsets, state.topic_ids, state.last_batch, state.generation) == (
        {("t", 0): 20}, {"t": "id-1"}, 1, 0), "the same txns as delta-rs writes, read by the same reader"
    assert DeltaTable(str(table)).transaction_version("app") == 1, "delta-rs sees delta-spark's marker"
    assert state_rs.offsets == {("t", 0): 10}
    version = DeltaTable(str(table)).version()
    # a replay is skipped by either engine, whichever wrote the batch
    assert not commit_with_delta_spark(delta, _rows(delta, 10, 10), SparkBatch(
        str(table), "app", 1, end_offsets={("t", 0): 20}, start_offsets={("t", 0): 10}))
    assert not commit_with_delta_spark(delta, _rows(delta, 0, 10), SparkBatch(
        str(table), "app", 0, end_offsets={("t", 0): 10}, start_offsets={("t", 0): 0}))
    assert not commit_rows(table, "app", 1, 10, 10)
    assert DeltaTable(str(table)).version() == version
    assert commit_rows(table, "app", 2, 20, 5)                                                  # delta-rs resumes
    assert _keys(delta, table) == [("t", 0, i) for i in range(25)]
    # a newer generation fences the delta-spark engine too, nothing committed
    claim_generation(str(table), "app", SCHEMA)
    version = DeltaTable(str(table)).version()
    with pytest.raises(FencedError, match="generation 0 was superseded by generation 1"):
        commit_with_delta_spark(delta, _rows(delta, 25, 5), SparkBatch(str(table), "app", 3,
                                                                       end_offsets={("t", 0): 30},
                                                                       start_offsets={("t", 0): 25}))
    assert DeltaTable(str(table)).version() == version
    history = DeltaTable(str(table)).history()
    tags = [h["tags"] for h in history if (h.get("tags") or {}).get("pylog.engine") == "delta-spark"]
    assert [t["pylog.batchId"] for t in tags] == ["1"] and tags[0]["pylog.offsets"] == '{"t":{"0":20}}'


def test_a_merge_keeps_each_keys_latest_record_deletes_tombstoned_keys_and_applies_once(delta, tmp_path):
    from connectors.delta_spark_commit import SparkBatch, commit_with_delta_spark

    table = tmp_path / "keyed"

    ends: dict[int, int] = {-1: 0}

    def merge(batch: int, end: int, records: list[tuple[int, str, str | None]]) -> bool:
        """Batch `batch`, from the previous batch's end to `end`, as a stream's foreachBatch commits it."""
        ends[batch] = end
        return commit_with_delta_spark(delta, _keyed(delta, records), SparkBatch(
            str(table), "cdc", batch, end_offsets={("t", 0): end}, start_offsets={("t", 0): ends[batch - 1]},
            mode="merge", merge_keys=["key"]))

    def state() -> dict[str, tuple[str, int]]:
        rows = delta.read.format("delta").load(str(table)).collect()
        assert len(rows) == len({r.key for r in rows}), "no key twice"
        return {r.key: (r.value, r.offset) for r in rows}

    # within a batch the latest offset wins, whatever the order the rows come in
    assert merge(0, 5, [(2, "a", "a2"), (0, "a", "a0"), (1, "b", "b1"), (3, "c", "c3"), (4, "b", None)])
    assert state() == {"a": ("a2", 2), "c": ("c3", 3)}, "b's tombstone is its latest record: not inserted"
    assert merge(1, 9, [(5, "a", None), (6, "c", "c6"), (7, "d", "d7"), (8, "d", "d8")])
    after = state()
    assert after == {"c": ("c6", 6), "d": ("d8", 8)}
    assert not merge(1, 9, [(5, "a", "replayed"), (6, "c", "replayed")]), "a replayed batch is skipped"
    assert state() == after
    assert app_state(str(table), "cdc").offsets == {("t", 0): 9}
    # a later upsert of a deleted key brings it back; other files' rows stay untouched
    assert merge(2, 10, [(9, "a", "a9")])
    assert state() == {"a": ("a9", 9), "c": ("c6", 6), "d": ("d8", 8)}
