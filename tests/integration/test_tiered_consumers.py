"""The consumer behaviours of test_broker_clients.py and test_other_clients.py on tiered topics (issue 30): topics
with 16 KiB segments and `local.retention.bytes` 1, so every closed segment is uploaded and then deleted from the
disk. Each test produces, waits until every partition's local log starts past 90% of what it wrote (the rest only
in remote storage), then reads with a real client: librdkafka with each codec, offsets by time and the watermarks,
a seek into the middle of a remote segment, a consumer group resuming from an offset that lies in the bucket,
a group of three Java consumers (Kafka's own client) handing partitions over mid-read, kcat, kafka-python and
aiokafka. The broker's own counter of bytes served from remote storage must grow with
each read.

The store is a local directory: the remote read path is the same code for any store (pyarrow's file systems);
MinIO serves the tiered tests of test_tiered_storage.py and test_direct_reads.py.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from pylog.launch.process import BrokerProcess
from tests.support.broker_process import broker_metrics
from tests.support.clients import consume, create_topic, unique_name
from tests.support.kafka_tools import java_result
from tests.support.waiting import wait_for

TIERED = {"remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"}
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def tiered_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("tiered-consumers")
    broker = BrokerProcess(root / "broker", settings={
        "remote.log.storage.system.enable": "true", "remote.log.storage.url": str(root / "remote"),
        "remote.log.manager.task.interval.ms": 200, "log.retention.check.interval.ms": 200,
        "metrics.port": 0}).start()
    try:
        yield broker
    finally:
        broker.close()


def _remote_bytes(broker: BrokerProcess) -> float:
    return broker_metrics(broker)["pylog_remote_fetch_bytes_total"]


def _produce(broker: BrokerProcess, topic: str, records: list[tuple[bytes, bytes]], partitions: int,
             **conf: object) -> None:
    """Records i to partition i % partitions, in batches below the segment size, every one acknowledged."""
    errors: list[str] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 8192, **conf,
                  "on_delivery": lambda err, _msg: err and errors.append(str(err))})
    for i, (key, value) in enumerate(records):
        p.produce(topic, key=key, value=value, partition=i % partitions, timestamp=T0 + i * 1000)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0 and not errors, errors[:3]


def _tiered(broker: BrokerProcess, topic: str, partitions: int, total: int) -> None:
    """Until each partition's disk keeps less than 10% of its records: the rest is only in remote storage."""
    def local_start(p: int) -> int:
        return min(int(f.stem) for f in (broker.data_dir / f"{topic}-{p}").glob("*.log"))
    wait_for(lambda: all(local_start(p) >= 0.9 * (total // partitions) for p in range(partitions)), 60,
             f"{topic}: 90% of each partition only in remote storage")


T0 = int(time.time() * 1000) - 86_400_000      # record i is stamped T0 + i seconds


def _records(n: int, tag: str, text: bool = False) -> list[tuple[bytes, bytes]]:
    """Incompressible values (random bytes; random hex for a line-based tool), so that every codec's topic
    spans well over ten segments a partition."""
    def value() -> bytes:
        return os.urandom(100).hex().encode() if text else os.urandom(160)
    return [(f"k{i}".encode(), f"{tag}-{i:05d}-".encode() + value()) for i in range(n)]


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_reads_back_from_remote_storage_with_dense_offsets(tiered_broker, codec):
    topic = unique_name(f"tc-{codec}")
    create_topic(tiered_broker.bootstrap, topic, partitions=4, config=TIERED)
    records = _records(4000, codec)
    _produce(tiered_broker, topic, records, 4, **{"compression.type": codec, "acks": "all"})
    _tiered(tiered_broker, topic, 4, len(records))
    served = _remote_bytes(tiered_broker)
    got = consume(tiered_broker.bootstrap, topic, range(4), len(records))
    assert sorted((m.key(), m.value()) for m in got) == sorted(records)
    for p in range(4):
        assert sorted(m.offset() for m in got if m.partition() == p) == list(range(1000))
    assert _remote_bytes(tiered_broker) > served, "the reads came from remote storage"


def test_watermarks_times_and_a_seek_into_a_remote_segment(tiered_broker):
    topic = unique_name("tc-times")
    create_topic(tiered_broker.bootstrap, topic, partitions=1, config=TIERED)
    records = _records(3000, "t")
    _produce(tiered_broker, topic, records, 1)
    _tiered(tiered_broker, topic, 1, len(records))
    c = Consumer({"bootstrap.servers": tiered_broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 3000)
        for i in (0, 1, 777, 1500, 2999):
            [tp] = c.offsets_for_times([TopicPartition(topic, 0, T0 + i * 1000)], timeout=10)
            assert tp.offset == i, f"timestamp of record {i}"
        [tp] = c.offsets_for_times([TopicPartition(topic, 0, T0 + 1234 * 1000 + 500)], timeout=10)
        assert tp.offset == 1235
    finally:
        c.close()
    served = _remote_bytes(tiered_broker)
    got = consume(tiered_broker.bootstrap, topic, [0], 10, start=1234)      # into the middle of a remote segment
    assert [(m.offset(), m.value()) for m in got] == [(1234 + i, records[1234 + i][1]) for i in range(10)]
    assert _remote_bytes(tiered_broker) > served


def test_a_group_resumes_from_a_committed_offset_in_remote_storage(tiered_broker):
    topic, group = unique_name("tc-group"), unique_name("tc-g")
    create_topic(tiered_broker.bootstrap, topic, partitions=2, config=TIERED)
    records = _records(3000, "g")
    _produce(tiered_broker, topic, records, 2)
    _tiered(tiered_broker, topic, 2, len(records))
    conf = {"bootstrap.servers": tiered_broker.bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest"}
    first = Consumer(conf)
    seen: list[bytes] = []
    try:
        first.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(seen) < 1000 and time.monotonic() < deadline:
            for m in first.consume(1000 - len(seen), 0.5):
                assert m.error() is None, m.error()
                seen.append(m.value())
                first.commit(m, asynchronous=False)
    finally:
        first.close()
    assert len(seen) == 1000
    second = Consumer(conf)
    try:
        second.subscribe([topic])
        committed = second.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10)
        assert all(0 < tp.offset < 1350 for tp in committed), committed      # offsets that lie in the bucket
        deadline = time.monotonic() + 60
        while len(seen) < 3000 and time.monotonic() < deadline:
            for m in second.consume(3000 - len(seen), 0.5):
                assert m.error() is None, m.error()
                seen.append(m.value())
    finally:
        second.close()
    assert sorted(seen) == sorted(v for _, v in records), "every record once across the two members"


def test_kcat_kafka_python_and_aiokafka_read_a_tiered_topic_from_the_beginning(tiered_broker):
    from aiokafka import AIOKafkaConsumer
    from kafka import KafkaConsumer

    topic = unique_name("tc-clients")
    create_topic(tiered_broker.bootstrap, topic, partitions=2, config=TIERED)
    records = _records(3000, "c", text=True)
    _produce(tiered_broker, topic, records, 2, **{"compression.type": "gzip"})
    _tiered(tiered_broker, topic, 2, len(records))
    values = sorted(v for _, v in records)

    out = subprocess.run(["kcat", "-C", "-b", tiered_broker.bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                          "-f", "%s\n"], capture_output=True, check=True, timeout=60).stdout
    assert sorted(out.splitlines()) == values

    kp = KafkaConsumer(topic, bootstrap_servers=tiered_broker.bootstrap, group_id=unique_name("tc-kp"),
                       auto_offset_reset="earliest", consumer_timeout_ms=5000, enable_auto_commit=False)
    try:
        assert sorted(m.value for m in kp) == values
    finally:
        kp.close()

    async def aio() -> list[bytes]:
        c = AIOKafkaConsumer(topic, bootstrap_servers=tiered_broker.bootstrap, group_id=unique_name("tc-aio"),
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < len(values) and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=1000)
                got += [m.value for msgs in batch.values() for m in msgs]
        finally:
            await c.stop()
        return got
    assert sorted(asyncio.run(aio())) == values


def test_a_group_of_java_consumers_reads_a_tiered_topic_once(tiered_broker):
    """Kafka's Java client (tests/java/ClientCheck.java): three members of one group, the first reading alone
    before the others join, so partitions change hands mid-read, at offsets in remote storage."""
    topic, group = unique_name("tc-java"), unique_name("tc-java-g")
    create_topic(tiered_broker.bootstrap, topic, partitions=6, config=TIERED)
    _produce(tiered_broker, topic, _records(6000, "j"), 6)
    _tiered(tiered_broker, topic, 6, 6000)
    served = _remote_bytes(tiered_broker)
    result = java_result("consume-group", tiered_broker.bootstrap, topic, group, "range", "3", "6000")
    assert result["total"] == 6000 and result["distinct"] == 6000 and result["duplicates"] == 0, result
    assert result["committed"] == {str(p): 1000 for p in range(6)}
    assert _remote_bytes(tiered_broker) > served
