"""The Fetch request, built in one place for both of its users (as Kafka's `FetchRequest.Builder`
with `forConsumer` and `forReplica`).

A consumer (the Spark source's executors, sparklog.kafka_client) fetches with replica id -1, its
isolation level, no fetch session and no leader epochs; a follower (broker.replication.replica_fetcher)
fetches with its broker id, READ_UNCOMMITTED, in an incremental fetch session (KIP-227) with the
leader epoch and log start offset of each partition and the partitions the session forgets. Both
build the same body here; the caller frames and sends it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from kafka_protocol.api_keys import ApiKey
from kafka_protocol.builder import build
from kafka_protocol.codec import request_schema
from kafka_protocol.topic_partition import TopicPartition

CONSUMER_REPLICA_ID = -1
NO_SESSION_ID, FULL_SESSION_EPOCH = 0, -1     # a fetch outside any session (KIP-227)


@dataclass(frozen=True)
class FetchPartition:
    """One partition of a Fetch: where to read and how much, with what the follower knows."""

    topic: str
    partition: int
    offset: int
    max_bytes: int
    current_leader_epoch: int = -1      # -1: no epoch check (a consumer's)
    log_start_offset: int = -1          # a follower's, so the leader can advance its own


def for_consumer(version: int, partitions: Sequence[FetchPartition], *, max_wait_ms: int, max_bytes: int,
                 read_committed: bool, rack_id: str = "") -> Any:
    """A consumer's Fetch: replica id -1, no session; `rack_id` (client.rack, v11+) lets the leader name a replica
    in the consumer's rack to fetch from instead (KIP-392)."""
    return _build(version, partitions, CONSUMER_REPLICA_ID, max_wait_ms, max_bytes, int(read_committed),
                  NO_SESSION_ID, FULL_SESSION_EPOCH, (), rack_id)


def for_replica(version: int, replica_id: int, partitions: Sequence[FetchPartition], *, max_wait_ms: int,
                max_bytes: int, session_id: int = NO_SESSION_ID, session_epoch: int = FULL_SESSION_EPOCH,
                forgotten: Iterable[TopicPartition] = ()) -> Any:
    """A follower's Fetch: its broker id, READ_UNCOMMITTED; in a fetch session only the partitions that changed,
    and `forgotten` the ones the session drops."""
    return _build(version, partitions, replica_id, max_wait_ms, max_bytes, 0, session_id, session_epoch, forgotten)


def _build(version: int, partitions: Sequence[FetchPartition], replica_id: int, max_wait_ms: int, max_bytes: int,
           isolation_level: int, session_id: int, session_epoch: int, forgotten: Iterable[TopicPartition],
           rack_id: str = "") -> Any:
    schema = request_schema(ApiKey.FETCH, version)
    if schema is None:
        raise ValueError(f"no request schema for Fetch v{version}")
    topics: dict[str, list[dict[str, int]]] = {}
    for p in partitions:
        topics.setdefault(p.topic, []).append({
            "partition": p.partition, "current_leader_epoch": p.current_leader_epoch, "fetch_offset": p.offset,
            "last_fetched_epoch": -1, "log_start_offset": p.log_start_offset, "partition_max_bytes": p.max_bytes})
    gone: dict[str, list[int]] = {}
    for topic, partition in forgotten:
        gone.setdefault(topic, []).append(partition)
    return build(schema, {
        "replica_id": replica_id, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes,
        "isolation_level": isolation_level, "session_id": session_id, "session_epoch": session_epoch, "rack_id": rack_id,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in gone.items()]})
