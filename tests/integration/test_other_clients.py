"""Pure-Python Kafka clients work unmodified: aiokafka and kafka-python, producers and group consumers."""
from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.clients import create_topic


@pytest.fixture(scope="module")
def pylog_broker(broker):
    """The module's one broker (tests/integration/conftest.py), not one per test: every test here makes
    topics (and groups) of its own and reads only those."""
    return broker


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)],
                                                               timeout=10)}
    finally:
        c.close()


def test_aiokafka_idempotent_producer_and_group_consumer(pylog_broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    create_topic(pylog_broker.bootstrap, "aio", partitions=1)

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=pylog_broker.bootstrap, enable_idempotence=True, compression_type="gzip")
        await p.start()
        try:
            for i in range(100):
                await p.send_and_wait("aio", f"v{i}".encode(), key=b"k")
        finally:
            await p.stop()
        c = AIOKafkaConsumer("aio", bootstrap_servers=pylog_broker.bootstrap, group_id="aio-g",
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        got: list[bytes] = []
        try:
            async for m in c:
                got.append(m.value)
                if len(got) == 100:
                    break
            await c.commit()
        finally:
            await c.stop()
        return got

    got = asyncio.run(asyncio.wait_for(run(), 60))
    assert got == [f"v{i}".encode() for i in range(100)]
    assert _committed(pylog_broker.bootstrap, "aio-g", "aio", 1) == {0: 100}


def test_kafka_python_producer_and_group_consumer(pylog_broker):
    from kafka import KafkaConsumer, KafkaProducer

    create_topic(pylog_broker.bootstrap, "kp", partitions=2)
    p = KafkaProducer(bootstrap_servers=pylog_broker.bootstrap, acks="all", compression_type="gzip")
    for i in range(50):
        p.send("kp", f"x{i}".encode(), partition=i % 2)
    p.flush()
    p.close()
    c = KafkaConsumer("kp", bootstrap_servers=pylog_broker.bootstrap, group_id="kp-g", auto_offset_reset="earliest",
                      consumer_timeout_ms=5000, enable_auto_commit=False)
    got = sorted(m.value for m in c)
    c.commit()
    c.close()
    assert got == sorted(f"x{i}".encode() for i in range(50))
    assert _committed(pylog_broker.bootstrap, "kp-g", "kp", 2) == {0: 25, 1: 25}


def test_kafka_python_admin_topics_configs_and_groups(pylog_broker):
    """kafka-python's KafkaAdminClient end to end (its CreateTopics answer once broke the broker's encoder)."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=pylog_broker.bootstrap, request_timeout_ms=15000)
    try:
        created = admin.create_topics([NewTopic("kp-admin", 2, 1, topic_configs={"cleanup.policy": "compact",
                                                                                    "compression.type": "gzip"})])
        assert [t["error_code"] for t in created["topics"]] == [0] if isinstance(created, dict) else created
        assert "kp-admin" in admin.list_topics()
        admin.create_partitions({"kp-admin": NewPartitions(total_count=3)})
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin")])
        text = repr(configs)
        assert "compact" in text and "gzip" in text   # batches are stored (and read back) gzipped
        producer = KafkaProducer(bootstrap_servers=pylog_broker.bootstrap)
        for i in range(6):
            producer.send("kp-admin", key=b"k%d" % i, value=b"v%d" % i, partition=i % 3)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer("kp-admin", bootstrap_servers=pylog_broker.bootstrap, group_id="kp-admin-group",
                                 auto_offset_reset="earliest", consumer_timeout_ms=10000)
        got = sorted(m.value for m in consumer)
        consumer.commit()
        consumer.close()
        assert got == [b"v%d" % i for i in range(6)]
        assert "kp-admin-group" in repr(admin.list_groups())
        offsets = admin.list_group_offsets("kp-admin-group")["kp-admin-group"]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == {0: 2, 1: 2, 2: 2}
        assert "kp-admin-group" in repr(admin.describe_groups(["kp-admin-group"]))
        admin.delete_topics(["kp-admin"])
        assert "kp-admin" not in admin.list_topics()
    finally:
        admin.close()
