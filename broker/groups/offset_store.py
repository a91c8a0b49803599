"""Committed offsets and group metadata, durable in the compacted internal topic `__consumer_offsets`.

Owns: creating `__consumer_offsets` (offsets.topic.num.partitions partitions, cleanup.policy=compact,
segment.bytes=offsets.topic.segment.bytes), loading it at startup, the in-memory table of committed
offsets per group, and writing commits, group metadata and tombstones as real v2 record batches in
Kafka's own key/value formats (one batch per request, on the group's partition).

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
from kafka_protocol.record_builder import Record, decode_records, encode_batch, iter_batches
from broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
LOAD_CHUNK_BYTES = 1 << 20



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
        tombstones delete."""
        started = time.monotonic()
        groups: dict[str, GroupValue] = {}
        for p in range(self.num_partitions) if partitions is None else partitions:
            for rec in self._read_partition(p):
                if rec.key is None:
                    continue
                key = decode_key(rec.key)
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
        for g in [g for g, offs in self._offsets.items() if not offs]:
            del self._offsets[g]
        count = sum(len(o) for o in self._offsets.values())
        return LoadResult(groups, count, time.monotonic() - started)

    def _read_partition(self, partition: int) -> list[Record]:
        plog = self.replicas.partition(OFFSETS_TOPIC, partition)
        out: list[Record] = []
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            data = plog.read(offset, LOAD_CHUNK_BYTES).read_bytes()
            if not data:
                break
            last = offset - 1
            for pos, size in iter_batches(data):
                for rec in decode_records(memoryview(data)[pos:pos + size]):
                    if rec.offset >= offset:
                        out.append(rec)
                    last = max(last, rec.offset)
            if last < offset:
                break
            offset = last + 1
        return out

    def unload(self, partition: int) -> list[str]:
        """Cluster mode, leadership of `partition` moved away: forget its groups' offsets; their ids."""
        gone = [g for g in self._offsets if partition_for(g, self.num_partitions) == partition]
        for g in gone:
            del self._offsets[g]
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
    def _write(self, group: str, entries: list[tuple[bytes, bytes | None]], now_ms: int) -> tuple[int, int]:
        """Append the entries on the group's partition; (partition, offset after them)."""
        if self.replicas.cluster is None and self.replicas.registry.get(OFFSETS_TOPIC) is None:
            # a client deleted it (Kafka allows that too): recreate it with the same partition count,
            # so every group keeps its partition; what was committed before is still held in memory
            log.warning("%s was deleted; recreating it with %d partitions", OFFSETS_TOPIC, self.num_partitions)
            self.ensure_topic()
        records = [Record(i, now_ms, k, v) for i, (k, v) in enumerate(entries)]
        partition = partition_for(group, self.num_partitions)
        result = self.replicas.append(OFFSETS_TOPIC, partition, encode_batch(records))
        return partition, result.last_offset + 1

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
