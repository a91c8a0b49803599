"""Thin helpers over confluent-kafka for tests: create topics, produce with delivery checks, read back."""
from __future__ import annotations

import time
import uuid
from typing import Any, Iterable

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    client = admin(bootstrap)  # keep a reference: a collected client cancels its futures
    fut = client.create_topics([NewTopic(topic, partitions, 1, config=config or {})], operation_timeout=10)
    fut[topic].result(timeout=15)


def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes] | bytes], *,
            partition: int | None = None, headers: list[tuple[str, bytes]] | None = None, **conf: Any) -> list[tuple[int, int]]:
    """Produce and flush; returns (partition, offset) per record in order; raises on any delivery error."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    results: list[Any] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any, i: int) -> None:
        if err is not None:
            errors.append(err)
        results[i] = (msg.partition(), msg.offset())

    for i, rec in enumerate(records):
        key, value = rec if isinstance(rec, tuple) else (None, rec)
        results.append(None)
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": lambda e, m, i=i: on_delivery(e, m, i)}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                p.produce(topic, **kwargs)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    remaining = p.flush(30)
    if remaining or errors:
        raise KafkaException(errors[0] if errors else f"{remaining} records not delivered")
    return results


def consume(bootstrap: str, topic: str, partitions: Iterable[int], count: int, timeout: float = 30.0,
            start: int = -2, **conf: Any) -> list[Any]:
    """Read `count` messages by assignment (no group) from `start` (-2 earliest) on each partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "pylog-tests-unused", "enable.auto.commit": False,
                  "enable.partition.eof": False, **conf})
    try:
        c.assign([TopicPartition(topic, p, start) for p in partitions])
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for m in c.consume(min(1000, count - len(out)), 0.5):
                if m.error():
                    raise KafkaException(m.error())
                out.append(m)
        return out
    finally:
        c.close()


def unique_name(prefix: str) -> str:
    """A topic or group name no other test uses: `prefix-<8 hex digits>`."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def read_to_end(bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float = 30.0) -> list[bytes]:
    """Every value of `topic` a consumer with `isolation` (read_committed / read_uncommitted) sees, read to the
    end of each of its `partitions`, sorted."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("read-to-end"), "isolation.level": isolation,
                  "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                at_end.add(m.partition())
                continue
            at_end.discard(m.partition())
            out.append(m.value())
        assert len(at_end) == partitions, f"{topic} was not read to its end"
        return sorted(out)
    finally:
        c.close()
