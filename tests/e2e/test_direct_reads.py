"""Direct reads of tiered offsets (issue 30, part 4): a Spark batch read whose offsets lie in a tiered topic's remote
segments reads them from the bucket in the executors, not through the broker, with the same rows a broker read
gives, read_committed included; `directReads=false` sends it through the broker again. And the jobs on a topic
whose first 90% is in the bucket: a reprocess reading the bucket directly, killed once at each stage of its work
(planned, written, committed), leaves every record exactly once, in a table byte for byte the one a batch load
reading through the broker wrote.

Real components: a pylog broker tiering to MinIO, librdkafka producers (one of them transactional, aborting one
transaction), Spark, `pylog job` processes. The broker's own counter of bytes it served from remote storage tells
which path ran.
"""
from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from connectors.offset_manager import OffsetManager, end_offsets
from connectors.table_location import TableLocation
from pylog.launch.process import BrokerProcess
from tests.support.broker_process import broker_metrics
from tests.support.jobs import assert_exactly_once, finish, produce_events, run_job
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.object_store, pytest.mark.timeout(600)]

TIERED = {"remote.storage.enable": "true", "segment.bytes": "32768", "local.retention.bytes": "40000"}


def _remote_fetch_bytes(broker: BrokerProcess) -> float:
    return broker_metrics(broker)["pylog_remote_fetch_bytes_total"]


def _tiering_broker(tmp_path: Path, url: str) -> BrokerProcess:
    """A broker tiering to `url` with quick upload and retention passes, its metrics served (which path ran)."""
    return BrokerProcess(tmp_path / "broker", settings={
        "remote.log.storage.system.enable": "true", "remote.log.storage.url": url,
        "remote.log.manager.task.interval.ms": 200, "log.retention.check.interval.ms": 200,
        "metrics.port": 0}).start()


def _local_start(broker: BrokerProcess, topic: str, partition: int) -> int:
    return min(int(f.stem) for f in (broker.data_dir / f"{topic}-{partition}").glob("*.log"))


def test_a_batch_read_of_tiered_offsets_reads_the_bucket_in_the_executors(spark, s3_env, tmp_path: Path) -> None:
    prefix = uuid.uuid4().hex
    url = f"s3://tables/{prefix}"
    broker = _tiering_broker(tmp_path, url)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("old", 2, 1, config=TIERED)])["old"].result(15)
        errors: list[str] = []
        conf = {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 8192,   # below segment.bytes
                "on_delivery": lambda err, _msg: err and errors.append(str(err))}
        plain = Producer({**conf, "enable.idempotence": True})
        txn = Producer({**conf, "transactional.id": f"t-{prefix[:8]}"})
        txn.init_transactions(30)
        expected: dict[int, list[bytes]] = {0: [], 1: []}
        for part in (0, 1):
            for i in range(1200):
                value = f"p{part}-{i:05d}-".encode() + b"x" * 80
                plain.produce("old", value=value, partition=part)
                expected[part].append(value)
            assert plain.flush(30) == 0
            for commit in (False, True):           # an aborted transaction a read_committed reader must drop
                txn.begin_transaction()
                for i in range(300):
                    value = f"p{part}-{'c' if commit else 'a'}{i:04d}-".encode() + b"y" * 80
                    txn.produce("old", value=value, partition=part)
                    if commit:
                        expected[part].append(value)
                txn.flush(30)
                (txn.commit_transaction if commit else txn.abort_transaction)(30)
            for i in range(1200, 2400):            # more plain records after the transactions
                value = f"p{part}-{i:05d}-".encode() + b"x" * 80
                plain.produce("old", value=value, partition=part)
                expected[part].append(value)
            assert plain.flush(30) == 0
        assert not errors, errors[:3]
        wait_for(lambda: all(_local_start(broker, "old", p) > 2000 for p in (0, 1)), 60,
                 "most of each partition only in the bucket")

        # the store's settings as options: Spark's planning processes have the environment Spark started with
        store = {f"remoteStorage.{k}": v for k, v in s3_env.storage_options().items()}

        def read(direct: bool) -> dict[int, list[bytes]]:
            rows = (spark.read.format("pylog").option("kafka.bootstrap.servers", broker.bootstrap)
                    .option("subscribe", "old").option("kafka.isolation.level", "read_committed")
                    .option("remoteStorage", url).options(**store).option("directReads", str(direct).lower())
                    .load().select("partition", "offset", "value").collect())
            out: dict[int, list[bytes]] = {0: [], 1: []}
            for r in sorted(rows, key=lambda r: (r.partition, r.offset)):
                out[r.partition].append(bytes(r.value))
            return out

        served = _remote_fetch_bytes(broker)
        started = time.monotonic()
        assert read(direct=True) == expected, "every committed record once, in order, none of the aborted"
        assert _remote_fetch_bytes(broker) == served, "the executors read the bucket; the broker served none of it"
        direct_s = time.monotonic() - started
        assert read(direct=False) == expected
        assert _remote_fetch_bytes(broker) > served, "directReads=false: the broker served the tiered offsets"
        assert direct_s < 120
    finally:
        broker.close()


def _rows(table: Path):
    """Every column of every row but when the job wrote it (`ingested_at`), in log order: what two tables hold,
    compared byte for byte."""
    rows = TableLocation.of(table).delta().to_pyarrow_table()
    return rows.drop_columns(["ingested_at"]).sort_by([("partition", "ascending"), ("offset", "ascending")])


def _killed(proc) -> None:
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, f"the fault point killed the job (exit {proc.returncode}):\n{out[-3000:]}"


def test_jobs_on_a_topic_90_percent_in_the_bucket_exactly_once_and_the_same_either_path(s3_env, tmp_path: Path) -> None:
    url = f"s3://tables/{uuid.uuid4().hex}"
    broker = _tiering_broker(tmp_path, url)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("events", 2, 1, config={
            "remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"})])[
            "events"].result(15)
        total = 6000
        produce_events(broker.bootstrap, "events", 0, total, conf={"batch.size": 8192})   # below segment.bytes
        ends = end_offsets(broker.bootstrap, ["events"])
        assert sum(ends.values()) == total and min(ends.values()) > total / 4
        wait_for(lambda: all(_local_start(broker, t, p) >= 0.9 * end for (t, p), end in ends.items()), 90,
                 "the first 90% of each partition only in the bucket")
        direct, through_broker = tmp_path / "direct", tmp_path / "broker-read"
        base = {"source.bootstrap.servers": broker.bootstrap, "source.topics": "events", "group.mirror": "",
                "sink.app.id": "rp"}

        served = _remote_fetch_bytes(broker)
        finish(run_job("batch_load", {**base, "sink.table.path": through_broker}))     # no store url: the broker
        assert _remote_fetch_bytes(broker) > served, "without the store's url the broker served the tiered offsets"
        assert_exactly_once(through_broker, "rp", broker.bootstrap, "events", total)

        # a rebuild into a new table reading the bucket directly, killed once at each stage of its work
        rebuild = {**base, "source.remote.storage.url": url, "sink.table.path": through_broker,
                   "reprocess.mode": "new-table", "reprocess.target.path": direct}
        served = _remote_fetch_bytes(broker)
        _killed(run_job("reprocess", rebuild, env={"PYLOG_FAULT_KILL_AFTER_CLAIM": "0"}))       # planned
        assert OffsetManager(TableLocation.of(direct), "rp").generation() is not None, "killed after its claim"
        assert _rows(direct).num_rows == 0, "a claim alone is no row"
        _killed(run_job("reprocess", rebuild, env={"PYLOG_FAULT_KILL_BEFORE_DELTA_COMMIT": "0"}))  # written
        committed = set(TableLocation.of(direct).delta().file_uris())
        written = {str(f) for f in direct.rglob("*.parquet")}
        assert len(written) > len(committed), "killed with its files written and not committed"
        assert _rows(direct).num_rows == 0, "files written but not committed are no rows"
        _killed(run_job("reprocess", rebuild, env={"PYLOG_FAULT_KILL_AFTER_DELTA_COMMIT": "0"}))   # committed
        assert _remote_fetch_bytes(broker) == served, "the executors read the bucket; the broker served none of it"
        assert_exactly_once(direct, "rp", broker.bootstrap, "events", total)
        assert _rows(direct).equals(_rows(through_broker)), "byte for byte the table a read through the broker gave"
    finally:
        broker.close()
