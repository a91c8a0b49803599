"""Committed offsets and group metadata, durable in the compacted internal topic `__consumer_offsets`.

Owns: creating `__consumer_offsets` (offsets.topic.num.partitions partitions, cleanup.policy=compact,
segment.bytes=offsets.topic.segment.bytes), loading it at startup, the in-memory table of committed
offsets per group, and writing commits, group metadata and tombstones as real v2 record batches in
Kafka's own key/value formats (one batch per request, on the group's partition).

Transactional offset commits (TxnOffsetCommit, KIP-98) are written as a transactional batch of the
producer and stay pending, invisible to OffsetFetch, until the transaction's marker reaches the
group's partition: a commit marker makes them the group's offsets, an abort drops them
(`complete_txn`). Loading replays them the same way; a transaction still open at load stays pending.

Never validates membership or generations (the coordinator does) and never talks to clients.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from kafka_protocol.topic_partition import TopicPartition
from broker.groups.records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_key,
    group_value,
    offset_key,
    offset_value,
    partition_for,
)
from kafka_protocol.control_records import read_marker
from kafka_protocol.record_builder import Record, decode_records, encode_batch
from broker.log.record_reader import read_batches
from broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"



@dataclass
class LoadResult:
    groups: dict[str, GroupValue]
    offsets: int
    seconds: float


class OffsetStore:
    def __init__(self, replicas: ReplicaManager, num_partitions: int, segment_bytes: int) -> None:
        self.replicas = replicas
        self.num_partitions = num_partitions
        self.segment_bytes = segment_bytes
        self._offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}
        # group -> producer id -> commits of its open transaction
        self._pending: dict[str, dict[int, dict[TopicPartition, OffsetValue]]] = {}

    # -- startup
    def ensure_topic(self, replication_factor: int = 1) -> None:
        registry = self.replicas.registry
        info = registry.get(OFFSETS_TOPIC)
        if info is None:
            self.replicas.create_topic(OFFSETS_TOPIC, self.num_partitions, replication_factor,
                                       {"cleanup.policy": "compact", "segment.bytes": str(self.segment_bytes)})
            return
        self.num_partitions = info.partitions    # the topic's partition count is fixed once created
        if registry.config_of(OFFSETS_TOPIC).segment_bytes != self.segment_bytes:
            overrides = {**info.overrides, "segment.bytes": str(self.segment_bytes)}
            self.replicas.set_topic_overrides(OFFSETS_TOPIC, overrides)

    def load(self, partitions: "list[int] | None" = None) -> LoadResult:
        """Replay `partitions` of `__consumer_offsets` (default: all): the latest value per key wins,
        tombstones delete; a transaction's commits count once its commit marker is read."""
        started = time.monotonic()
        groups: dict[str, GroupValue] = {}
        for p in range(self.num_partitions) if partitions is None else partitions:
            staged: dict[int, dict[str, dict[TopicPartition, OffsetValue]]] = {}    # producer id -> pending
            for h, batch in read_batches(self.replicas.partition(OFFSETS_TOPIC, p)):
                if h.is_control:
                    marker = read_marker(batch)
                    for group, offsets in staged.pop(marker.producer_id, {}).items():
                        if marker.commit:
                            self._offsets.setdefault(group, {}).update(offsets)
                    continue
                for rec in decode_records(batch):
                    if rec.key is None:
                        continue
                    key = decode_key(rec.key)
                    if isinstance(key, OffsetKey) and h.is_transactional and rec.value is not None:
                        pending = staged.setdefault(h.producer_id, {}).setdefault(key.group, {})
                        pending[(key.topic, key.partition)] = decode_offset_value(rec.value)
                    else:
                        self._apply(rec, key, groups)
            for producer_id, by_group in staged.items():         # transactions still open
                for group, offsets in by_group.items():
                    self._pending.setdefault(group, {}).setdefault(producer_id, {}).update(offsets)
        for g in [g for g, offs in self._offsets.items() if not offs]:
            del self._offsets[g]
        count = sum(len(o) for o in self._offsets.values())
        return LoadResult(groups, count, time.monotonic() - started)

    def _apply(self, rec: Record, key: OffsetKey | GroupKey | None, groups: dict[str, GroupValue]) -> None:
        if isinstance(key, OffsetKey):
            tp = (key.topic, key.partition)
            if rec.value is None:
                self._offsets.get(key.group, {}).pop(tp, None)
            else:
                self._offsets.setdefault(key.group, {})[tp] = decode_offset_value(rec.value)
        elif isinstance(key, GroupKey):
            if rec.value is None:
                groups.pop(key.group, None)
            else:
                groups[key.group] = decode_group_value(rec.value)

    def unload(self, partition: int) -> list[str]:
        """Cluster mode, leadership of `partition` moved away: forget its groups' offsets; their ids."""
        gone = [g for g in self._offsets if partition_for(g, self.num_partitions) == partition]
        for g in gone:
            del self._offsets[g]
        for g in [g for g in self._pending if partition_for(g, self.num_partitions) == partition]:
            del self._pending[g]
        return gone

    def partition_of(self, group: str) -> int:
        return partition_for(group, self.num_partitions)

    # -- queries
    def groups(self) -> list[str]:
        return list(self._offsets)

    def offsets_of(self, group: str) -> dict[TopicPartition, OffsetValue]:
        return dict(self._offsets.get(group, {}))

    def get(self, group: str, tp: TopicPartition) -> OffsetValue | None:
        return self._offsets.get(group, {}).get(tp)

    def has_offsets(self, group: str) -> bool:
        return bool(self._offsets.get(group))

    # -- writes
    def _write(self, group: str, entries: list[tuple[bytes, bytes | None]], now_ms: int,
               producer: tuple[int, int] | None = None) -> tuple[int, int]:
        """Append the entries on the group's partition, in a transactional batch of `producer` (id,
        epoch) if given; (partition, offset after them)."""
        if self.replicas.cluster is None and self.replicas.registry.get(OFFSETS_TOPIC) is None:
            # a client deleted it (Kafka allows that too): recreate it with the same partition count,
            # so every group keeps its partition; what was committed before is still held in memory
            log.warning("%s was deleted; recreating it with %d partitions", OFFSETS_TOPIC, self.num_partitions)
            self.ensure_topic()
        records = [Record(i, now_ms, k, v) for i, (k, v) in enumerate(entries)]
        partition = partition_for(group, self.num_partitions)
        if producer is None:
            result = self.replicas.append(OFFSETS_TOPIC, partition, encode_batch(records))
        else:
            batch = encode_batch(records, producer_id=producer[0], producer_epoch=producer[1], base_sequence=0,
                                 transactional=True)
            result = self.replicas.append(OFFSETS_TOPIC, partition, batch, coordinator=True)
        return partition, result.last_offset + 1

    def txn_commit(self, group: str, producer_id: int, producer_epoch: int,
                   offsets: dict[TopicPartition, OffsetValue], now_ms: int) -> tuple[int, int] | None:
        """Store a transaction's commit as pending; (partition, offset after it), None when there was nothing."""
        if not offsets:
            return None
        written = self._write(group, [(offset_key(group, t, p), offset_value(v)) for (t, p), v in offsets.items()],
                              now_ms, (producer_id, producer_epoch))
        self._pending.setdefault(group, {}).setdefault(producer_id, {}).update(offsets)
        return written

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction's marker reached `partition`: its pending commits there count (commit) or go."""
        for group in [g for g, by_producer in self._pending.items()
                      if producer_id in by_producer and partition_for(g, self.num_partitions) == partition]:
            offsets = self._pending[group].pop(producer_id)
            if not self._pending[group]:
                del self._pending[group]
            if commit:
                self._offsets.setdefault(group, {}).update(offsets)

    def has_pending(self, group: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds a commit for `tp` (OffsetFetch's require_stable)."""
        return any(tp in offsets for offsets in self._pending.get(group, {}).values())

    def commit(self, group: str, offsets: dict[TopicPartition, OffsetValue], now_ms: int) -> tuple[int, int] | None:
        """Store a commit; (partition, offset after it) in __consumer_offsets, None when there was nothing."""
        if not offsets:
            return None
        written = self._write(group, [(offset_key(group, t, p), offset_value(v)) for (t, p), v in offsets.items()],
                              now_ms)
        self._offsets.setdefault(group, {}).update(offsets)
        return written

    def delete_offsets(self, group: str, tps: list[TopicPartition], now_ms: int) -> int:
        """Tombstone the given offsets of `group` (those it has); returns how many were removed."""
        current = self._offsets.get(group, {})
        present = [tp for tp in tps if tp in current]
        if present:
            self._write(group, [(offset_key(group, t, p), None) for t, p in present], now_ms)
            for tp in present:
                del current[tp]
        if not current:
            self._offsets.pop(group, None)
        return len(present)

    def store_group(self, group: str, value: GroupValue, now_ms: int) -> None:
        self._write(group, [(group_key(group), group_value(value))], now_ms)

    def delete_group(self, group: str, now_ms: int) -> None:
        """Tombstones for every offset of `group` and for its metadata."""
        entries: list[tuple[bytes, bytes | None]] = [
            (offset_key(group, t, p), None) for t, p in self._offsets.pop(group, {})]
        entries.append((group_key(group), None))
        self._write(group, entries, now_ms)
