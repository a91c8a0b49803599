"""Pure-Python Kafka clients work unmodified: aiokafka and kafka-python, producers and group consumers."""
from __future__ import annotations

import asyncio

from confluent_kafka import Consumer, TopicPartition

from tests.support.clients import create_topic


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
