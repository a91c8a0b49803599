"""df.writeStream/df.write.format("pylog") with deliveryGuarantee=exactly-once, against pylog and Apache Kafka.

A user's topic-to-topic query: every input row reaches the output topic once for a read_committed
reader, also when Spark replays a micro-batch whose transactions were already committed (the batch's
commit lost from the checkpoint, as a crash between the two leaves it), where the at-least-once mode
writes the batch twice (the control that shows the test can fail). A batch write that fails in one task
leaves nothing visible. The job built on it (`pylog job stream_to_topic`) is killed at random points in
tests/e2e/test_jobs_stream_to_topic.py.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.conftest import produce_records
from tests.support.clients import read_to_end


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


read_topic = read_to_end          # the e2e cases read the output topic to its end


def run_stream(spark: Any, bootstrap: str, src: str, dst: str, checkpoint: Path, guarantee: str) -> Any:
    q = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", src)
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "40").load()
         .selectExpr("key", "concat(cast(value as string), '!') as value")
         .writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("topic", dst)
         .option("deliveryGuarantee", guarantee).option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(180), "the query did not finish"
    if q.exception() is not None:
        raise q.exception()
    return q


def replay_the_last_batch(spark: Any, bs: str, topic_name: Any, tmp_path: Path, guarantee: str) -> tuple[list[bytes], list[bytes]]:
    """Run a topic-to-topic query over 200 records in several micro-batches, then make Spark replay its last
    batch as after a crash between the batch's commit in the topic and Spark's own (the batch's commit file is
    lost); (what a read_committed reader sees after it, what it should see)."""
    src, dst = topic_name("eo-in"), topic_name("eo-out")
    create(bs, src, 2)
    create(bs, dst, 3)
    produce_records(bs, src, [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(200)])
    checkpoint = tmp_path / "cp"
    run_stream(spark, bs, src, dst, checkpoint, guarantee)
    batches = sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    assert len(batches) >= 3, "the input should take several micro-batches"
    expected = sorted(b"v%d!" % i for i in range(200))
    assert read_topic(bs, dst, 3, "read_committed") == expected
    last = batches[-1]
    for lost in (checkpoint / "commits" / str(last), checkpoint / "commits" / f".{last}.crc"):
        lost.unlink(missing_ok=True)
    replayed = run_stream(spark, bs, src, dst, checkpoint, guarantee)
    assert any(p["batchId"] == last and p["numInputRows"] > 0 for p in replayed.recentProgress), \
        "Spark did not replay the batch"
    return read_topic(bs, dst, 3, "read_committed"), expected


def test_a_replayed_micro_batch_is_written_once_in_exactly_once_mode(spark, shared_broker, topic_name, tmp_path):
    got, expected = replay_the_last_batch(spark, shared_broker.bootstrap, topic_name, tmp_path, "exactly-once")
    assert got == expected


def test_the_at_least_once_sink_writes_a_replayed_batch_again(spark, pylog_broker, topic_name, tmp_path):
    """The control: without transactions the same replay duplicates, so the test above can fail."""
    got, expected = replay_the_last_batch(spark, pylog_broker.bootstrap, topic_name, tmp_path, "at-least-once")
    assert len(got) > len(expected) and set(got) == set(expected)


def test_a_failed_batch_write_leaves_nothing_visible(spark, pylog_broker, topic_name):
    from pyspark.sql.functions import col, udf

    bs = pylog_broker.bootstrap
    dst = topic_name("eo-batch")
    create(bs, dst, 2)

    @udf("string")
    def fail_at_the_end(v: str) -> str:
        if v == "row-999":      # the last row of the second task: the first task has sent its rows by then
            import time
            time.sleep(3)
            raise ValueError("a task fails after the other task's rows were sent")
        return v

    df = spark.range(0, 1000, numPartitions=2).selectExpr("concat('row-', cast(id as string)) as value")
    ok = df.where(col("value") != "row-999")
    (ok.write.format("pylog").option("kafka.bootstrap.servers", bs).option("topic", dst)
     .option("deliveryGuarantee", "exactly-once").mode("append").save())
    assert len(read_topic(bs, dst, 2, "read_committed")) == 999
    with pytest.raises(Exception, match="a task fails"):
        (df.select(fail_at_the_end("value").alias("value")).write.format("pylog")
         .option("kafka.bootstrap.servers", bs).option("topic", dst).option("deliveryGuarantee", "exactly-once")
         .option("kafka.batch.size", "1000").mode("append").save())
    assert len(read_topic(bs, dst, 2, "read_committed")) == 999            # nothing of the failed write
    assert len(read_topic(bs, dst, 2, "read_uncommitted")) > 999           # though the first task's rows were sent


def test_bad_exactly_once_options_get_one_line(spark, pylog_broker, topic_name):
    df = spark.range(1).selectExpr("'x' as value")
    with pytest.raises(Exception, match="deliveryGuarantee") as e:
        (df.write.format("pylog").option("kafka.bootstrap.servers", pylog_broker.bootstrap)
         .option("topic", topic_name("x")).option("deliveryGuarantee", "exactly_once").mode("append").save())
    assert "allowed values are at-least-once, exactly-once" in str(e.value)
