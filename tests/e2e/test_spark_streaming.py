"""spark.readStream.format("pylog") and df.writeStream.format("pylog") against real brokers, local[2] Spark."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from sparklog.offsets import ORIGIN_KEY, TOPIC_IDS_KEY

from tests.e2e.conftest import produce_records, read_pylog
from tests.support.clients import create_topic


def stream(spark, bootstrap: str, **options: str):
    reader = spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def run_available_now(df, checkpoint: Path, out: Path, timeout: float = 120.0):
    """Run to completion into a Parquet sink (exactly-once across restarts); returns the query."""
    q = (df.selectExpr("topic", "partition", "offset", "value").writeStream.format("parquet")
         .option("path", str(out)).option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(timeout), "availableNow query did not finish"
    if q.exception() is not None:
        raise q.exception()
    return q


def data_batches(q) -> list[int]:
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"] > 0]


def offsets_read(spark, out: Path) -> list[tuple[int, int]]:
    return sorted((r["partition"], r["offset"]) for r in spark.read.parquet(str(out)).collect())


def checkpoint_offsets(checkpoint: Path, batch_id: int) -> dict:
    """The source's end offsets Spark recorded for a batch (the last line of offsets/<batchId>), topic ids and the
    first batch's origin apart."""
    recorded = json.loads((checkpoint / "offsets" / str(batch_id)).read_text().splitlines()[-1])
    ids = recorded.pop(TOPIC_IDS_KEY)
    origin = recorded.pop(ORIGIN_KEY, None)
    assert (origin is not None) == (batch_id == 0), "only the first batch carries the query's origin"
    assert set(ids) == set(recorded), "the offsets carry the id of every topic they name"
    return recorded


def test_available_now_honours_max_offsets_per_trigger(spark, pylog_broker, topic_name, tmp_path):
    shared_broker = pylog_broker     # the source's planning alone: on pylog only (make test's time)
    topic = topic_name("avnow")
    create_topic(shared_broker.bootstrap, topic, 4)
    produce_records(shared_broker.bootstrap, topic, [{"value": b"v", "partition": i % 4} for i in range(100)])
    df = stream(spark, shared_broker.bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="20")
    q = run_available_now(df, tmp_path / "cp", tmp_path / "out")
    assert data_batches(q) == [20] * 5, "20 per trigger, 5 per partition in proportion to equal backlogs"
    assert offsets_read(spark, tmp_path / "out") == [(p, o) for p in range(4) for o in range(25)]
    last = q.recentProgress[-1]["sources"][0]
    assert json.loads(last["latestOffset"]) == {topic: {str(p): 25 for p in range(4)}}, "reportLatestOffset"
    assert checkpoint_offsets(tmp_path / "cp", 4) == {topic: {str(p): 25 for p in range(4)}}


def test_rate_limit_is_proportional_to_backlog(spark, pylog_broker, topic_name, tmp_path):
    shared_broker = pylog_broker     # the source's planning alone: on pylog only (make test's time)
    topic = topic_name("prop")
    create_topic(shared_broker.bootstrap, topic, 2)
    produce_records(shared_broker.bootstrap, topic,
                    [{"value": b"a", "partition": 0}] * 90 + [{"value": b"b", "partition": 1}] * 10)
    df = stream(spark, shared_broker.bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="50")
    cp = tmp_path / "cp"
    run_available_now(df, cp, tmp_path / "out")
    assert checkpoint_offsets(cp, 0) == {topic: {"0": 45, "1": 5}}
    assert offsets_read(spark, tmp_path / "out") == [(0, o) for o in range(90)] + [(1, o) for o in range(10)]


def test_max_bytes_per_trigger_bounds_each_batch_in_stored_bytes(spark, shared_broker, topic_name, tmp_path):
    topic = topic_name("bytes")
    create_topic(shared_broker.bootstrap, topic, 2)
    produce_records(shared_broker.bootstrap, topic, [{"value": b"L" * 1000, "partition": 0}] * 60
                    + [{"value": b"s" * 10, "partition": 1}] * 60)
    df = stream(spark, shared_broker.bootstrap, subscribe=topic, startingOffsets="earliest", maxBytesPerTrigger="20k")
    q = run_available_now(df, tmp_path / "cp", tmp_path / "out")
    assert offsets_read(spark, tmp_path / "out") == [(p, o) for p in range(2) for o in range(60)]
    batches = data_batches(q)
    # about 61 KB stored in all: 20 KB per trigger means 3-5 batches, none of them everything at once
    assert 3 <= len(batches) <= 6 and max(batches) < 120, batches
    rows = spark.read.parquet(str(tmp_path / "out")).groupBy("partition").count().collect()
    assert {r["partition"]: r["count"] for r in rows} == {0: 60, 1: 60}


def test_restart_from_checkpoint_continues_without_gaps_or_duplicates(spark, shared_broker, topic_name, tmp_path):
    topic = topic_name("restart")
    create_topic(shared_broker.bootstrap, topic, 2)
    produce_records(shared_broker.bootstrap, topic, [{"value": b"1", "partition": i % 2} for i in range(30)])
    cp, out = tmp_path / "cp", tmp_path / "out"
    df = stream(spark, shared_broker.bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="12")
    run_available_now(df, cp, out)
    assert offsets_read(spark, out) == [(p, o) for p in range(2) for o in range(15)]
    produce_records(shared_broker.bootstrap, topic, [{"value": b"2", "partition": i % 2} for i in range(20)])
    # startingOffsets only applies to a new query: "latest" here must not skip anything
    df = stream(spark, shared_broker.bootstrap, subscribe=topic, startingOffsets="latest", maxOffsetsPerTrigger="12")
    run_available_now(df, cp, out)
    assert offsets_read(spark, out) == [(p, o) for p in range(2) for o in range(25)]


def test_new_partitions_and_pattern_topics_start_from_earliest(spark, shared_broker, topic_name, tmp_path):
    prefix = topic_name("pat")
    first, second = f"{prefix}-a", f"{prefix}-b"
    create_topic(shared_broker.bootstrap, first, 1)
    produce_records(shared_broker.bootstrap, first, [{"value": b"a"}] * 5)
    cp, out = tmp_path / "cp", tmp_path / "out"
    df = stream(spark, shared_broker.bootstrap, subscribePattern=f"{prefix}-.*", startingOffsets="latest")
    run_available_now(df, cp, out)   # starts at latest: nothing read yet
    produce_records(shared_broker.bootstrap, first, [{"value": b"a2", "partition": 0}] * 3)
    client = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    client.create_partitions([NewPartitions(first, 2)])[first].result(15)
    create_topic(shared_broker.bootstrap, second, 1)
    produce_records(shared_broker.bootstrap, first, [{"value": b"a3", "partition": 1}] * 4)
    produce_records(shared_broker.bootstrap, second, [{"value": b"b"}] * 6)
    run_available_now(df, cp, out)
    rows = sorted((r["topic"], r["partition"], r["offset"]) for r in spark.read.parquet(str(out)).collect())
    assert rows == ([(first, 0, o) for o in range(5, 8)] + [(first, 1, o) for o in range(4)]
                    + [(second, 0, o) for o in range(6)])


def _run_until_data_loss(spark, broker, topic, tmp_path, fail_on_data_loss: str):
    """A running query; records it has not read yet are deleted (DeleteRecords, what retention does)."""
    create_topic(broker.bootstrap, topic, 1)
    produce_records(broker.bootstrap, topic, [{"value": b"first"}] * 100)
    df = stream(spark, broker.bootstrap, subscribe=topic, startingOffsets="earliest", failOnDataLoss=fail_on_data_loss,
                minOffsetsPerTrigger="1000", maxTriggerDelay="1h")
    q = (df.select("offset").writeStream.format("memory").queryName(f"q_{topic.replace('-', '_')}")
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="200 milliseconds").start())
    deadline = time.monotonic() + 120
    while sum(p["numInputRows"] for p in q.recentProgress) < 100:
        assert time.monotonic() < deadline and q.isActive, q.exception()
        time.sleep(0.2)
    # The first trigger took 100 records; the next waits for 1000 (maxTriggerDelay 1h).
    produce_records(broker.bootstrap, topic, [{"value": b"second"}] * 100)           # offsets 100..199
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})   # keep a reference: futures die with it
    fut = admin.delete_records([TopicPartition(topic, 0, 150)])
    list(fut.values())[0].result(15)
    produce_records(broker.bootstrap, topic, [{"value": b"third"}] * 1000)           # offsets 200..1199
    return q


def test_fail_on_data_loss_true_stops_the_query_with_a_clear_error(spark, shared_broker, topic_name, tmp_path):
    q = _run_until_data_loss(spark, shared_broker, topic_name("loss-true"), tmp_path, "true")
    try:
        with pytest.raises(Exception) as info:
            q.awaitTermination(120)
        text = str(info.value)
        assert "Cannot fetch offset 100" in text and "the log now starts at offset 150" in text
        assert 'failOnDataLoss" to "false"' in text
    finally:
        q.stop()


def test_fail_on_data_loss_false_warns_and_goes_on(spark, pylog_broker, topic_name, tmp_path):
    shared_broker = pylog_broker     # the source's planning alone: on pylog only (make test's time)
    topic = topic_name("loss-false")
    q = _run_until_data_loss(spark, shared_broker, topic, tmp_path, "false")
    try:
        deadline = time.monotonic() + 120
        while sum(p["numInputRows"] for p in q.recentProgress) < 1150:
            assert time.monotonic() < deadline and q.isActive, q.exception()
            time.sleep(0.2)
        offsets = sorted(r[0] for r in spark.table(q.name).collect())
        assert offsets == list(range(100)) + list(range(150, 1200))
    finally:
        q.stop()


def _broker_accepts_offset_commit(bootstrap: str) -> bool:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    from tests.support.wire import WireClient

    host, port = bootstrap.split(":")
    with WireClient(host, int(port)) as w:
        resp = w.request(ApiVersionsRequest(client_software_name="pylog-tests", client_software_version="1"))
    return any(int(k.api_key) == 8 for k in resp.api_keys)   # 8 = OffsetCommit


def test_commit_to_group_mirrors_progress_into_a_consumer_group(spark, shared_broker, topic_name, tmp_path):
    assert _broker_accepts_offset_commit(shared_broker.bootstrap), "the broker advertises OffsetCommit"
    topic, group = topic_name("mirror"), topic_name("group")
    create_topic(shared_broker.bootstrap, topic, 2)
    produce_records(shared_broker.bootstrap, topic, [{"value": b"v", "partition": i % 2} for i in range(40)])
    df = stream(spark, shared_broker.bootstrap, subscribe=topic, startingOffsets="earliest",
                maxOffsetsPerTrigger="10", commitToGroup=group)
    run_available_now(df, tmp_path / "cp", tmp_path / "out")
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=15)
    finally:
        c.close()
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 20), (1, 20)]


def test_write_stream_into_a_topic(spark, shared_broker, topic_name, tmp_path):
    src, dst = topic_name("wsrc"), topic_name("wdst")
    create_topic(shared_broker.bootstrap, src, 2)
    create_topic(shared_broker.bootstrap, dst, 1)
    produce_records(shared_broker.bootstrap, src, [{"key": f"k{i}".encode(), "value": f"v{i}".encode(),
                                                    "partition": i % 2} for i in range(50)])
    q = (stream(spark, shared_broker.bootstrap, subscribe=src, startingOffsets="earliest", maxOffsetsPerTrigger="20")
         .selectExpr("key", "upper(cast(value as string)) as value").writeStream.format("pylog")
         .option("kafka.bootstrap.servers", shared_broker.bootstrap).option("topic", dst)
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    assert q.awaitTermination(120) and q.exception() is None
    got = sorted((r["key"], r["value"]) for r in read_pylog(spark, shared_broker.bootstrap, subscribe=dst).collect())
    assert got == sorted((f"k{i}".encode(), f"V{i}".encode()) for i in range(50))
