"""The partitions this broker leads: topic lifecycle, appends, reads and fetch waiters.

Owns the link between topic metadata (`TopicRegistry`) and storage (`LogManager`), automatic topic
creation, and waking long-polling fetches when data arrives (or, in cluster mode, when the high
watermark moves). API handlers call this; it never sees protocol types or sockets.

In cluster mode (`attach_cluster`) topics live in ZooKeeper: creation, deletion and partition
increases are written there through the cluster node and reach the local registry and logs when
the cluster view says so; appends and client reads go to the partition's leader only
(`replication.Replication` decides roles, epochs, the ISR and the high watermark).
"""
from __future__ import annotations

import asyncio
import logging
import resource
import uuid
from typing import TYPE_CHECKING, Iterable, Mapping

from kafka_protocol.topic_partition import TopicPartition
from broker.cluster.topic_registry import TopicInfo, TopicRegistry
from broker.config import BrokerConfig, TopicConfig
from kafka_protocol.errors import (
    FencedLeaderEpochError,
    InvalidConfigError,
    InvalidReplicationFactorError,
    PolicyViolationError,
    TopicDeletionDisabledError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from broker.log.constants import LEADER_EPOCH
from broker.log.log_manager import LogManager
from broker.log.partition_log import AppendResult, PartitionLog
from kafka_protocol.control_records import Marker

if TYPE_CHECKING:
    from broker.cluster.cluster_node import ClusterNode
    from broker.replication.manager import Replication

log = logging.getLogger(__name__)


# Kafka's controller refuses to create more partitions than this in one request (POLICY_VIOLATION).
MAX_PARTITIONS_PER_REQUEST = 10_000


class ReplicaManager:
    def __init__(self, config: BrokerConfig, registry: TopicRegistry, logs: LogManager) -> None:
        self.config = config
        self.registry = registry
        self.logs = logs
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        self.cluster: "ClusterNode | None" = None
        self.replication: "Replication | None" = None

    def attach_cluster(self, cluster: "ClusterNode", replication: "Replication") -> None:
        self.cluster = cluster
        self.replication = replication

    def startup(self) -> None:
        self.logs.startup(self.registry.configs())
        for info in self.registry:
            config = self.registry.config_of(info.name)
            for p in range(info.partitions):
                if self.logs.get(info.name, p) is None:
                    self.logs.create(info.name, p, config)

    # -- topics
    def create_topic(
        self,
        name: str,
        partitions: int | None,
        replication_factor: int | None,
        overrides: Mapping[str, str],
        validate_only: bool = False,
        assignment: dict[int, list[int]] | None = None,
    ) -> TopicInfo | TopicConfig:
        count = self.config["num.partitions"] if partitions in (None, -1) else partitions
        rf = self.config["default.replication.factor"] if replication_factor in (None, -1) else replication_factor
        self.check_tiering(self.registry.defaults.with_overrides(overrides))
        if self.cluster is not None:
            config = self.registry.check_new(name, count, overrides)
            created = self.cluster.create_topic(name, count, rf, overrides, validate_only, assignment)
            if validate_only:
                return config
            return TopicInfo(name, created.topic_id or uuid.UUID(int=0), count, dict(overrides),
                             name.startswith("__"))
        if rf != 1:
            raise InvalidReplicationFactorError(
                f"Replication factor {rf} is larger than the number of available brokers (1)."
            )
        config = self.registry.check_new(name, count, overrides)
        self.check_room_for(count)
        if validate_only:
            return config
        info = self.registry.create(name, count, overrides)
        try:
            for p in range(count):
                self.logs.create(name, p, config)
        except BaseException:
            self.registry.delete(name)      # all or nothing: no half-created topic survives a failure
            self.logs.delete_topic(name)
            raise
        return info

    def max_partitions(self) -> int:
        """max.broker.partitions, or a quarter of the open-file limit (each partition keeps files open)."""
        configured = self.config["max.broker.partitions"]
        if configured is not None:
            return int(configured)
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return max(1, soft // 4) if soft != resource.RLIM_INFINITY else 2**31 - 1

    def check_room_for(self, more: int) -> None:
        """PolicyViolationError, before any work, if `more` partitions would exceed max.broker.partitions."""
        held = sum(t.partitions for t in self.registry)
        limit = self.max_partitions()
        if held + more > limit:
            raise PolicyViolationError(
                f"{more} more partitions would make {held + more} on this broker, above max.broker.partitions={limit}")

    def auto_create(self, name: str) -> TopicInfo | None:
        """Create `name` with broker defaults if auto.create.topics.enable; None when disabled, and
        for internal names (`__consumer_offsets` is created by the group coordinator, with its settings)."""
        if not self.config["auto.create.topics.enable"] or name.startswith("__"):
            return None
        result = self.create_topic(name, None, None, {})
        assert isinstance(result, TopicInfo)
        return result

    def delete_topic(self, name: str) -> None:
        if not self.config["delete.topic.enable"]:
            raise TopicDeletionDisabledError("Topic deletion is disabled (delete.topic.enable=false)")
        if self.cluster is not None:
            self.cluster.delete_topic(name)        # the controller deletes; every broker follows the view
            return
        info = self.registry.delete(name)
        self.logs.delete_topic(name)
        for p in range(info.partitions):
            self._wake((name, p))

    def create_partitions(self, name: str, count: int, validate_only: bool = False,
                          assignments: list[list[int]] | None = None) -> None:
        if self.cluster is not None:
            self.cluster.create_partitions(name, count, validate_only, assignments)
            return
        info = self.registry.check_partition_increase(name, count)
        old = info.partitions
        self.check_room_for(count - old)
        if validate_only:
            return
        self.registry.set_partitions(name, count)
        config = self.registry.config_of(name)
        for p in range(old, count):
            self.logs.create(name, p, config)

    def set_topic_defaults(self, defaults: TopicConfig) -> None:
        """New broker-level topic defaults (dynamic broker configs): every topic's config follows."""
        self.registry.defaults = defaults
        for info in self.registry:
            self.logs.update_topic_config(info.name, self.registry.config_of(info.name))

    def check_tiering(self, config: TopicConfig) -> None:
        """remote.storage.enable needs tiered storage on the broker and a
        topic that deletes rather than compacts (Kafka's rules and wording); InvalidConfigError otherwise."""
        if not config.remote_storage_enable:
            return
        if not self.config["remote.log.storage.system.enable"]:
            raise InvalidConfigError("Tiered Storage functionality is disabled in the broker. Topic cannot be "
                                     "configured with remote log storage (set remote.log.storage.system.enable "
                                     "and remote.log.storage.url on the broker).")
        if "compact" in config.cleanup_policy:
            raise InvalidConfigError("Remote log storage only supported for topics with cleanup.policy=delete")

    def set_topic_overrides(self, name: str, overrides: Mapping[str, str], validate_only: bool = False) -> TopicConfig:
        self.registry.require(name)
        self.check_tiering(self.registry.defaults.with_overrides(overrides))
        if validate_only:
            return self.registry.defaults.with_overrides(overrides)
        if self.cluster is not None:
            # every replica follows /config/topics/<name> (the cluster view applies it, here too)
            config = self.registry.defaults.with_overrides(overrides)
            self.cluster.set_topic_config(name, overrides)
            return config
        config = self.registry.set_overrides(name, overrides)
        self.logs.update_topic_config(name, config)
        return config

    # -- partitions
    def partition(self, topic: str, partition: int) -> PartitionLog:
        info = self.registry.get(topic)
        if info is None:
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist")
        if not 0 <= partition < info.partitions:
            raise UnknownTopicOrPartitionError(f"Partition {partition} of topic '{topic}' does not exist")
        plog = self.logs.get(topic, partition)
        if plog is None:
            raise UnknownTopicOrPartitionError(f"Partition {topic}-{partition} is not hosted here")
        return plog

    def leader_log(self, topic: str, partition: int, current_leader_epoch: int = -1) -> PartitionLog:
        """The log of a partition this broker leads, for a client's request naming the epoch it knows
        (-1: none); NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE or FENCED/UNKNOWN_LEADER_EPOCH otherwise."""
        if self.replication is not None:
            return self.replication.leader_role(topic, partition, current_leader_epoch).log
        check_leader_epoch(current_leader_epoch, LEADER_EPOCH)
        return self.partition(topic, partition)

    def check_offsets_available(self, topic: str, partition: int) -> None:
        """Cluster mode: OFFSET_NOT_AVAILABLE while a new leader's high watermark may still trail (KIP-207)."""
        if self.replication is not None:
            self.replication.check_offsets_available(self.replication.leader_role(topic, partition))

    def leader_epoch(self, topic: str, partition: int) -> int:
        if self.replication is not None:
            return self.replication.leader_role(topic, partition).leader_epoch
        return LEADER_EPOCH

    def append(self, topic: str, partition: int, records: bytes | bytearray | memoryview,
               acks: int = 1, *, coordinator: bool = False) -> AppendResult:
        """Append as the partition's leader. acks=-1 in cluster mode first checks min.insync.replicas.
        `coordinator`: the broker's own records (transactional offset commits), not sequence-checked."""
        if self.replication is None:
            result = self.partition(topic, partition).append(records, coordinator=coordinator)
            self._wake((topic, partition))
            return result
        role = self.replication.leader_role(topic, partition)
        if acks == -1:
            self.replication.check_min_isr(role)
        result = role.log.append(records, leader_epoch=role.leader_epoch, coordinator=coordinator)
        self.replication.after_append(role)
        self._wake((topic, partition))
        return result

    def append_marker(self, topic: str, partition: int, marker: Marker) -> AppendResult:
        """Append a transaction coordinator's marker as the partition's leader (WriteTxnMarkers)."""
        if self.replication is None:
            result = self.partition(topic, partition).append_marker(marker)
            self._wake((topic, partition))
            return result
        role = self.replication.leader_role(topic, partition)
        result = role.log.append_marker(marker, leader_epoch=role.leader_epoch)
        self.replication.after_append(role)
        self._wake((topic, partition))
        return result

    def wait_replicated(self, topic: str, partition: int, end_offset: int,
                        timeout_ms: int) -> "asyncio.Future[None] | None":
        """acks=-1: None if every in-sync replica has the records below `end_offset`, else a future for it."""
        if self.replication is None:
            return None
        role = self.replication.leader_role(topic, partition)
        return self.replication.wait_replicated(role, end_offset, timeout_ms)

    # -- long poll support
    def waiter(self, partitions: Iterable[TopicPartition]) -> asyncio.Future[None]:
        """A future resolved at the next append to any of `partitions`; call `discard` when done."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for tp in partitions:
            self._waiters.setdefault(tp, set()).add(fut)
        return fut

    def discard(self, fut: asyncio.Future[None], partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            s = self._waiters.get(tp)
            if s is not None:
                s.discard(fut)
                if not s:
                    del self._waiters[tp]

    def wake(self, tp: TopicPartition) -> None:
        """New records became readable in `tp` (an append, or a high watermark that moved)."""
        self._wake(tp)

    def _wake(self, tp: TopicPartition) -> None:
        waiters = self._waiters.pop(tp, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    # -- housekeeping, called by the server's scheduler
    def run_retention(self, now_ms: int) -> int:
        return self.logs.run_retention(now_ms)

    def shutdown(self) -> None:
        self.logs.shutdown()


def check_leader_epoch(current_leader_epoch: int, leader_epoch: int) -> None:
    """KIP-320: a request naming the leader epoch it knows (-1: none) must name the current one."""
    if current_leader_epoch > leader_epoch:
        raise UnknownLeaderEpochError(f"leader epoch {current_leader_epoch} is newer than {leader_epoch}")
    if 0 <= current_leader_epoch < leader_epoch:
        raise FencedLeaderEpochError(f"leader epoch {current_leader_epoch} is older than {leader_epoch}")


def parse_config_entries(entries: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in entries:
        if value is None:
            raise InvalidConfigError(f"Null value for configuration {name}")
        out[name] = value
    return out
