"""The one name for a partition of a topic, everywhere in pylog: `(topic, partition)`.

A plain tuple (hashable, cheap, what every dict of per-partition state is keyed by), as the broker,
the Spark source and the connectors all key their state; Kafka's `TopicPartition` in its clients.
"""
from __future__ import annotations

TopicPartition = tuple[str, int]


def format_tp(tp: TopicPartition) -> str:
    """`topic-partition`, as Kafka's tools print it."""
    return f"{tp[0]}-{tp[1]}"
