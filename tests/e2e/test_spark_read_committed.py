"""spark.read/readStream.format("pylog") with kafka.isolation.level, over a topic holding committed, aborted and
open transactions, against pylog's broker and Apache Kafka: read_committed reads exactly the committed records
and stops at the last stable offset (an open transaction holds a stream back, never hangs it); the default,
read_uncommitted (Spark's), reads every record up to the high watermark.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from tests.e2e.test_exactly_once_topic_sink import create


def fill(bootstrap: str, topic: str) -> Producer:
    """Per partition: 5 plain records, a committed transaction of 4, an aborted one of 3, 2 plain records,
    a transaction of 2 left open (its producer returned, to commit later), and 3 plain records after it."""
    plain = Producer({"bootstrap.servers": bootstrap})
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn", "linger.ms": 5})
    txn.init_transactions(30)

    def produce(p: Producer, prefix: str, n: int) -> None:
        for partition in (0, 1):
            for i in range(n):
                p.produce(topic, value=f"{prefix}-{partition}-{i}".encode(), partition=partition)
        p.flush(30)

    produce(plain, "plain", 5)
    txn.begin_transaction()
    produce(txn, "committed", 4)
    txn.commit_transaction(30)
    txn.begin_transaction()
    produce(txn, "aborted", 3)
    txn.abort_transaction(30)
    produce(plain, "late", 2)
    txn.begin_transaction()
    produce(txn, "open", 2)
    produce(plain, "after", 3)
    return txn


def values(rows: list[Any]) -> list[str]:
    return sorted(r["value"].decode() for r in rows)


def expected(*prefixes_and_counts: tuple[str, int]) -> list[str]:
    return sorted(f"{prefix}-{p}-{i}" for prefix, n in prefixes_and_counts for p in (0, 1) for i in range(n))


def test_read_committed_reads_committed_records_up_to_the_last_stable_offset(spark, shared_broker, topic_name,
                                                                              tmp_path: Path):
    bs, topic = shared_broker.bootstrap, topic_name("rc")
    create(bs, topic, 2)
    open_txn = fill(bs, topic)

    def read(isolation: str | None) -> list[str]:
        reader = spark.read.format("pylog").option("kafka.bootstrap.servers", bs).option("subscribe", topic)
        if isolation:
            reader = reader.option("kafka.isolation.level", isolation)
        return values(reader.load().collect())

    # the open transaction holds the last stable offset back: the plain records after it wait too
    assert read("read_committed") == expected(("plain", 5), ("committed", 4), ("late", 2))
    assert read(None) == expected(("plain", 5), ("committed", 4), ("aborted", 3), ("late", 2), ("open", 2),
                                  ("after", 3))

    def stream() -> list[str]:
        out = tmp_path / "out"
        q = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bs).option("subscribe", topic)
             .option("startingOffsets", "earliest").option("kafka.isolation.level", "read_committed").load()
             .selectExpr("CAST(value AS STRING) AS value").writeStream.format("json").option("path", str(out))
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
        assert q.awaitTermination(120), "a read_committed stream must end at the last stable offset"
        assert q.exception() is None
        return sorted(r["value"] for r in spark.read.json(str(out)).collect())

    assert stream() == expected(("plain", 5), ("committed", 4), ("late", 2))
    open_txn.commit_transaction(30)
    assert stream() == expected(("plain", 5), ("committed", 4), ("late", 2), ("open", 2), ("after", 3))
